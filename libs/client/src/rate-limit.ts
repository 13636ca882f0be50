/**
 * The rate-limit headers every answer to an authenticated request carries (any status, 429
 * included): `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`.
 */
export interface RateLimit {
  /** The account's daily limit. */
  limit: number;
  /** Requests left today: max(0, limit − requests today). */
  remaining: number;
  /** When the count starts again: 00:00:00.000Z of the next UTC day. */
  reset: Date;
}

const integer = (value: string | null) => (value !== null && /^\d+$/.test(value) ? Number(value) : undefined);

/** The rate-limit headers of an answer, or undefined when it has none (unauthenticated, health checks). */
export function rateLimitOf(headers: Headers): RateLimit | undefined {
  const limit = integer(headers.get('x-ratelimit-limit'));
  const remaining = integer(headers.get('x-ratelimit-remaining'));
  const resetHeader = headers.get('x-ratelimit-reset');
  const reset = resetHeader === null ? Number.NaN : Date.parse(resetHeader);
  if (limit === undefined || remaining === undefined || Number.isNaN(reset)) return undefined;
  return { limit, remaining, reset: new Date(reset) };
}
