import { hash } from 'node:crypto';

/**
 * Conditional GETs (RFC 9110 §8.8.3, §13.1.2). The gateway derives a strong ETag from the exact
 * bytes of every 200 answer to a GET or HEAD under /v1, so it is the same for every upstream and
 * changes exactly when the representation does. A GET whose If-None-Match names the current tag is
 * answered 304 with no body and is not counted (docs/metering.md, "Conditional GETs").
 */
export function strongEtag(body: string | Buffer): string {
  // One-shot crypto.hash: the same digest as createHash().update().digest() without a Hash object.
  return `"${hash('sha256', body, 'base64url')}"`;
}

/**
 * True when an If-None-Match header value matches the tag: `*`, or a list of entity tags one of
 * which equals it by the weak comparison RFC 9110 prescribes for If-None-Match (a `W/` prefix is
 * ignored). A malformed member never matches (the request is answered in full).
 */
export function ifNoneMatchMatches(header: string | string[] | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const value = Array.isArray(header) ? header.join(',') : header;
  if (value.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  for (const raw of value.split(',')) {
    const member = raw.trim().replace(/^W\//, '');
    if (member === opaque) return true;
  }
  return false;
}

/** Cache-Control of a 200 (or 304) answer of a GET route: private (per account), max-age from the route table. */
export function cacheControl(maxAgeSeconds: number): string {
  return `private, max-age=${maxAgeSeconds}`;
}
