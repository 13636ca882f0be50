/**
 * Credentials in the headers of a delivery attempt are never stored (docs/webhooks.md, "Delivery
 * log"): a receiver's `Set-Cookie` or `WWW-Authenticate`, or an `Authorization` on either side,
 * would otherwise be shown to anyone who reads the log. The name stays (it helps to debug: "the
 * receiver set a cookie"), the value becomes `[redacted]`.
 */
export const REDACTED = '[redacted]';

/** Header names whose values are redacted, lower-case (names are compared case-insensitively). */
const REDACTED_HEADERS: ReadonlySet<string> = new Set(['set-cookie', 'authorization', 'proxy-authorization', 'www-authenticate']);

/** The headers with the values of REDACTED_HEADERS replaced by `[redacted]`; names and order kept. */
export function redactHeaders<T extends Record<string, string> | null>(headers: T): T {
  if (headers === null) return headers;
  let out: Record<string, string> | undefined;
  for (const name of Object.keys(headers)) {
    if (!REDACTED_HEADERS.has(name.toLowerCase())) continue;
    out ??= { ...headers };
    out[name] = REDACTED;
  }
  return (out ?? headers) as T;
}
