/**
 * The bytes to send for a delivery stored without its body (rows written before migration 0003):
 * its payload as compact JSON with the envelope's keys in the contract's order (id, type,
 * created_at, data). jsonb does not keep the key order inside `data`.
 */
export function envelopeText(payload: string): string {
  const { id, type, created_at, data, ...rest } = JSON.parse(payload) as Record<string, unknown>;
  return JSON.stringify({ id, type, created_at, data, ...rest });
}
