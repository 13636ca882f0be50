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

declare const brand: unique symbol;

/** A string that has passed one id kind's parser (`IdKind.parse`): the type says which kind. */
export type Branded<B extends string> = string & { readonly [brand]: B };

/** One kind of id: its pattern (anchored, for JSON schemas), its parser and its brand. */
export interface IdKind<B extends string> {
  /** The anchored pattern text of the id as this system accepts it. */
  readonly pattern: string;
  /** The id (lower-cased where the kind ignores case); undefined when `value` is not one. */
  parse(value: unknown): Branded<B> | undefined;
  /** True when `value` is an id of this kind exactly as written (no normalisation). */
  is(value: unknown): value is Branded<B>;
}

function idKind<B extends string>(pattern: string, ignoreCase = false): IdKind<B> {
  const exact = new RegExp(pattern);
  const loose = new RegExp(pattern, ignoreCase ? 'i' : '');
  return {
    pattern,
    parse: (value) =>
      typeof value === 'string' && loose.test(value) ? ((ignoreCase ? value.toLowerCase() : value) as Branded<B>) : undefined,
    is: (value): value is Branded<B> => typeof value === 'string' && exact.test(value),
  };
}

/** The brand of an id kind, as a type: `type EventId = IdOf<typeof EventId>`. */
export type IdOf<K> = K extends IdKind<infer B> ? Branded<B> : never;

/**
 * An event id: `evt_` and up to 100 letters, digits or hyphens, the form the event log's CHECK
 * keeps; the facility outbox issues `evt_<uuid>`. The `webhook-id` of its deliveries.
 */
export const EventId = idKind<'EventId'>('^evt_[A-Za-z0-9-]{1,100}$');
export type EventId = IdOf<typeof EventId>;

/** A webhook subscription id, `wh_<uuid>` (lower case, as issued). */
export const SubscriptionId = idKind<'SubscriptionId'>(prefixedIdPattern('wh'));
export type SubscriptionId = IdOf<typeof SubscriptionId>;

/** A delivery id, `dlv_<uuid>` (lower case, as issued). */
export const DeliveryId = idKind<'DeliveryId'>(prefixedIdPattern('dlv'));
export type DeliveryId = IdOf<typeof DeliveryId>;

/** An API key's id, `key_<uuid>` (lower case, as issued). Never the key itself. */
export const KeyId = idKind<'KeyId'>(prefixedIdPattern('key'));
export type KeyId = IdOf<typeof KeyId>;

/** A facility id: a UUID, in any case from a client, lower case once parsed. */
export const FacilityId = idKind<'FacilityId'>(`^${UUID_PATTERN}$`, true);
export type FacilityId = IdOf<typeof FacilityId>;

/** An enforcement case id: a UUID, in any case from a client, lower case once parsed. */
export const CaseId = idKind<'CaseId'>(`^${UUID_PATTERN}$`, true);
export type CaseId = IdOf<typeof CaseId>;

/** A violation id: a UUID, in any case from a client, lower case once parsed. */
export const ViolationId = idKind<'ViolationId'>(`^${UUID_PATTERN}$`, true);
export type ViolationId = IdOf<typeof ViolationId>;
