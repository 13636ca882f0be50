import { decodeListCursor, encodeListCursor, type KeysetList, UUID_ANY_CASE } from '@fcd/service-kit/pure';
import { isCalendarDate } from './records';

/**
 * The keyset lists of the facility API (service-kit's `keysetPage`, one helper for every list).
 * A cursor names the list it belongs to (its tag) and the sort key of the last row returned; the
 * next page starts strictly after it, so rows inserted during a walk never shift the rows already
 * listed (no duplicates, none skipped). The tags are those cursors have always carried, so a
 * cursor issued before keeps working.
 *
 * - facilities: ordered by registry_id ascending (the immutable natural key)
 * - violations: violation_date descending, then id descending
 * - cases:      filed_date descending, then id descending
 * - near:       facilities by distance from the search centre ascending, then registry_id (the
 *               distance is carried exactly, as the float8 Postgres computed; the cursor is only
 *               valid for the same centre, which the client sends again)
 * - sorted:     facilities by one value (`sort=`), then registry_id, each sort with its own tag
 */
export type CursorKind = 'facilities' | 'violations' | 'cases' | 'near';

export type FacilityKey = { registry_id: string };
export type DatedKey = { date: string; id: string };
export type NearKey = { distance_m: number; registry_id: string };

export interface CursorKeys {
  facilities: FacilityKey;
  violations: DatedKey;
  cases: DatedKey;
  near: NearKey;
}

/** Text Postgres takes as a parameter: no NUL (a cursor carrying one is refused, not a 500). */
const pgText = (value: string) => !value.includes('\u0000');

function registryId(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 && value.length <= 40 && pgText(value) ? value : undefined;
}

function datedKey(values: readonly unknown[]): DatedKey | undefined {
  const [date, id] = values;
  if (values.length !== 2 || typeof date !== 'string' || typeof id !== 'string') return undefined;
  if (!isCalendarDate(date) || !UUID_ANY_CASE.test(id)) return undefined;
  return { date, id: id.toLowerCase() };
}

/** Facilities by registry_id; `T` is any row that carries it. */
export function facilityList<T extends { registry_id: string }>(): KeysetList<FacilityKey, T> {
  return {
    tag: 'f1',
    keyOf: (item) => ({ registry_id: item.registry_id }),
    toValues: (key) => [key.registry_id],
    fromValues: (values) => {
      const id = values.length === 1 ? registryId(values[0]) : undefined;
      return id === undefined ? undefined : { registry_id: id };
    },
  };
}

/** Facilities by distance from a centre, then registry_id; `T` carries the exact distance in metres. */
export function nearList<T extends { registry_id: string; distance_m: number }>(): KeysetList<NearKey, T> {
  return {
    tag: 'g1',
    keyOf: (item) => ({ distance_m: item.distance_m, registry_id: item.registry_id }),
    toValues: (key) => [key.distance_m, key.registry_id],
    fromValues: (values) => {
      const [distance_m, id] = values;
      if (values.length !== 2 || typeof distance_m !== 'number' || !Number.isFinite(distance_m) || distance_m < 0) return undefined;
      const registry_id = registryId(id);
      return registry_id === undefined ? undefined : { distance_m, registry_id };
    },
  };
}

/** A facility's position in a list sorted by one value (`sort=`), ties broken by registry_id. */
export type SortedKey = { value: string | number; registry_id: string };

/**
 * What a sorted list's cursor may carry as its value, each within what its SQL cast takes: text
 * (a name), a decimal (numeric), an integer (int4), a date text (or the no-date sentinel), a
 * transaction id (xid8, unsigned 64-bit, as decimal text).
 */
export type SortValueKind = 'text' | 'decimal' | 'integer' | 'date' | 'xid';

// numeric's text of a JSON number holds every digit it was written with (a float's shortest form:
// 17 significant digits, so up to about 40 decimals for a small one): all of them come back.
const DECIMAL_TEXT = /^-?\d{1,20}(\.\d{1,40})?$/;
const DATE_TEXT = /^(\d{4}-\d{2}-\d{2})$/;
const XID_TEXT = /^\d{1,20}$/;
const INT4_MAX = 2_147_483_647;

function sortValue(kind: SortValueKind, value: unknown): string | number | undefined {
  if (kind === 'integer') return Number.isInteger(value) && Math.abs(value as number) <= INT4_MAX ? (value as number) : undefined;
  if (typeof value !== 'string') return undefined;
  if (kind === 'decimal') return DECIMAL_TEXT.test(value) ? value : undefined;
  if (kind === 'date') return value === '9999-99-99' || (DATE_TEXT.test(value) && isCalendarDate(value)) ? value : undefined;
  if (kind === 'xid') return XID_TEXT.test(value) && BigInt(value) < 2n ** 64n ? value : undefined;
  return value.length <= 400 && pgText(value) ? value : undefined;
}

/**
 * Facilities sorted by one value (`sort=name`, `-penalties_total`, ...): each sort has its own
 * tag, so a cursor of one sort is refused under another. `T` carries the value as `sort_value`.
 */
export function sortedList<T extends { registry_id: string; sort_value: string | number }>(
  tag: string,
  kind: SortValueKind,
  poll = false,
): KeysetList<SortedKey, T> {
  return {
    tag,
    poll,
    keyOf: (item) => ({ value: item.sort_value, registry_id: item.registry_id }),
    toValues: (key) => [key.value, key.registry_id],
    fromValues: (values) => {
      const [raw, id] = values;
      const value = values.length === 2 ? sortValue(kind, raw) : undefined;
      const registry_id = registryId(id);
      return value === undefined || registry_id === undefined ? undefined : { value, registry_id };
    },
  };
}

/** Violations, newest first: violation_date, then id, descending. */
export function violationList<T extends { violation_date: string; id: string }>(): KeysetList<DatedKey, T> {
  return {
    tag: 'v1',
    keyOf: (item) => ({ date: item.violation_date, id: item.id }),
    toValues: (key) => [key.date, key.id],
    fromValues: datedKey,
  };
}

/** Enforcement cases, newest first: filed_date, then id, descending. */
export function caseList<T extends { filed_date: string; id: string }>(): KeysetList<DatedKey, T> {
  return {
    tag: 'c1',
    keyOf: (item) => ({ date: item.filed_date, id: item.id }),
    toValues: (key) => [key.date, key.id],
    fromValues: datedKey,
  };
}

const LISTS: { [K in CursorKind]: KeysetList<CursorKeys[K], never> } = {
  facilities: facilityList(),
  violations: violationList(),
  cases: caseList(),
  near: nearList(),
};

export function encodeCursor<K extends CursorKind>(kind: K, key: CursorKeys[K]): string {
  const list = LISTS[kind] as KeysetList<CursorKeys[K], never>;
  return encodeListCursor(list.tag, list.toValues(key));
}

/** The key the cursor carries, or undefined when it is not a cursor of this list. */
export function decodeCursor<K extends CursorKind>(kind: K, cursor: string): CursorKeys[K] | undefined {
  const list = LISTS[kind] as KeysetList<CursorKeys[K], never>;
  const values = decodeListCursor(list.tag, cursor);
  return values === undefined ? undefined : list.fromValues(values);
}
