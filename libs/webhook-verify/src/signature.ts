import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The service's own delivery signature: `X-Service-Signature: sha256=<lowercase hex
 * HMAC-SHA256(raw body)>`, keyed by the whole secret string (including `whsec_`) as UTF-8. Same
 * scheme as GitHub's X-Hub-Signature-256, so its libraries verify ours. During a secret rotation
 * with overlap the header carries one value per valid secret, newest first, comma-separated.
 */
export const SIGNATURE_HEADER = 'x-service-signature';
const SIGNATURE_PATTERN = /^sha256=[0-9a-fA-F]{64}$/;

export function sign(secret: string, rawBody: string | Uint8Array): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'));
  mac.update(typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody);
  return `sha256=${mac.digest('hex')}`;
}

/** The header value for one or more valid secrets, newest first: `sha256=<new>,sha256=<old>`. */
export function signatureHeader(secrets: readonly string[], rawBody: string | Uint8Array): string {
  return secrets.map((s) => sign(s, rawBody)).join(',');
}

/** Compares one `sha256=` value in constant time; false for a missing or malformed header. */
export function verify(secret: string, rawBody: string | Uint8Array, header: string | null | undefined): boolean {
  if (typeof header !== 'string' || !SIGNATURE_PATTERN.test(header)) return false;
  const given = Buffer.from(header.slice('sha256='.length), 'hex');
  const expected = Buffer.from(sign(secret, rawBody).slice('sha256='.length), 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** True when any comma-separated `sha256=` value of the header matches the secret. */
export function verifyAny(secret: string, rawBody: string | Uint8Array, header: string | null | undefined): boolean {
  if (typeof header !== 'string') return false;
  let ok = false;
  // Every value is checked (no early exit), so timing does not tell which one matched.
  for (const value of header.split(',', 8)) ok = verify(secret, rawBody, value.trim()) || ok;
  return ok;
}
