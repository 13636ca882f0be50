/**
 * Opaque keyset cursors, one codec for every list: base64url of the JSON array [tag, ...values].
 * The tag names the list (and, where it matters, its owner); the values are the sort key of the
 * last row returned. A cursor of another list does not decode, so it is a validation error rather
 * than a position in someone else's order. Each list checks the types of its values itself.
 */

const CURSOR_TEXT = /^[A-Za-z0-9_-]{1,400}$/;

export function encodeListCursor(tag: string, values: readonly unknown[]): string {
  return Buffer.from(JSON.stringify([tag, ...values]), 'utf8').toString('base64url');
}

/** The values a cursor of the list tagged `tag` carries; undefined when the text is not one. */
export function decodeListCursor(tag: string, text: string): unknown[] | undefined {
  if (!CURSOR_TEXT.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed[0] !== tag) return undefined;
  return parsed.slice(1);
}
