/**
 * The shapes of ids, defined once: UUIDs in their text form and the ids with a type prefix
 * (`wh_<uuid>`, issued by prefixedId). JSON schemas take the pattern text, code the regular
 * expressions.
 */

/** The type prefixes of ids (`<prefix>_<uuid>`). */
export type IdPrefix = 'wh' | 'evt' | 'dlv' | 'acct' | 'key';

/** A UUID in lower-case hex, as pattern text without anchors (to compose JSON-schema patterns). */
export const UUID_PATTERN = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

/** A UUID as a client may write it, in any letter case (lower-case it before use). */
export const UUID_ANY_CASE = new RegExp(`^${UUID_PATTERN}$`, 'i');

/** A UUID as this system writes it: lower case only. */
export const UUID_LOWER_CASE = new RegExp(`^${UUID_PATTERN}$`);

/** The pattern text of an id with a type prefix, anchored (`^wh_<uuid>$`). */
export function prefixedIdPattern(prefix: IdPrefix): string {
  return `^${prefix}_${UUID_PATTERN}$`;
}

/** The regular expression of an id with a type prefix, as issued (lower case only). */
export function prefixedIdRegExp(prefix: IdPrefix): RegExp {
  return new RegExp(prefixedIdPattern(prefix));
}
