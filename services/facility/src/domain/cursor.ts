import { decodeListCursor, encodeListCursor, UUID_ANY_CASE } from '@fcd/service-kit/pure';
import { isCalendarDate } from './records';

/**
 * Opaque keyset cursors (service-kit's list cursor, tagged per list). A cursor names the list it belongs to and the sort key
 * of the last row returned; the next page starts strictly after it, so rows
 * inserted during a walk never shift the rows already listed (no duplicates,
 * none skipped).
 *
 * - facilities: ordered by registry_id ascending (the immutable natural key)
 * - violations: violation_date descending, then id descending
 * - cases:      filed_date descending, then id descending
 * - near:       facilities by distance from the search centre ascending, then registry_id (the
 *               distance is carried exactly, as the float8 Postgres computed; the cursor is only
 *               valid for the same centre, which the client sends again)
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

const TAG: Record<CursorKind, string> = { facilities: 'f1', violations: 'v1', cases: 'c1', near: 'g1' };

export function encodeCursor<K extends CursorKind>(kind: K, key: CursorKeys[K]): string {
  const values = 'distance_m' in key ? [key.distance_m, key.registry_id] : 'registry_id' in key ? [key.registry_id] : [key.date, key.id];
  return encodeListCursor(TAG[kind], values);
}

/** The key the cursor carries, or undefined when it is not a cursor of this list. */
export function decodeCursor<K extends CursorKind>(kind: K, cursor: string): CursorKeys[K] | undefined {
  const values = decodeListCursor(TAG[kind], cursor);
  if (!values) return undefined;
  if (kind === 'near') {
    const [distance_m, registry_id] = values;
    if (values.length !== 2 || typeof distance_m !== 'number' || !Number.isFinite(distance_m) || distance_m < 0) return undefined;
    if (typeof registry_id !== 'string' || registry_id.length === 0 || registry_id.length > 40) return undefined;
    return { distance_m, registry_id } as CursorKeys[K];
  }
  if (kind === 'facilities') {
    const [registry_id] = values;
    if (values.length !== 1 || typeof registry_id !== 'string' || registry_id.length === 0 || registry_id.length > 40) return undefined;
    return { registry_id } as CursorKeys[K];
  }
  const [date, id] = values;
  if (values.length !== 2 || typeof date !== 'string' || typeof id !== 'string') return undefined;
  if (!isCalendarDate(date) || !UUID_ANY_CASE.test(id)) return undefined;
  return { date, id: id.toLowerCase() } as CursorKeys[K];
}
