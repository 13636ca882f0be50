import type { FacilitySnapshotOf } from '../domain/events';
import type { Facility } from '../domain/model';
import { FACILITY_COLUMNS, FACILITY_FIELDS, type FacilityRow, toFacility } from './rows';
import type { Queryable } from './sql';

/**
 * The snapshots of the facilities that events about violations and cases carry (`violation.new`
 * `data.facility`, `case.*` `data.facilities`), mapped like `facility.status_changed`'s
 * `data.facility`. The caller reads them in the transaction that writes the events' outbox rows,
 * after its own writes: an event carries its facilities as of the event, and a subscription filter
 * reads them from the payload at fan-out without a query of its own. One query for all the ids.
 */
export async function facilitySnapshots(client: Queryable, ids: Iterable<string>): Promise<FacilitySnapshotOf> {
  const unique = [...new Set(ids)];
  const byId = new Map<string, Facility>();
  if (unique.length > 0) {
    const { rows } = await client.query<FacilityRow>(`SELECT ${FACILITY_COLUMNS} FROM facilities WHERE id = ANY($1::uuid[])`, [unique]);
    for (const r of rows) byId.set(r.id, toFacility(r));
  }
  return snapshotOf(byId);
}

/** Each facility column with its name in snapshotColumns' result, built once. */
const SNAPSHOT_KEYS = FACILITY_FIELDS.map((c) => [c, `snapshot.${c}`] as const);

/**
 * A facility's columns, each as `"snapshot.<column>"`, for a statement that joins `facilities f`
 * (the violations' upsert): the snapshot read by the writing statement itself, one round trip less
 * between an event's created_at and its commit. Only rows for which `when` holds carry them (the
 * others get nulls), so a batch does not send back a facility for every row it only updated.
 */
export function snapshotColumns(when: string): string {
  return SNAPSHOT_KEYS.map(([c, aliased]) => `CASE WHEN ${when} THEN f.${c} END AS "${aliased}"`).join(', ');
}

/** The snapshots carried by those of `rows` that have them (snapshotColumns). */
export function snapshotsOf(rows: ReadonlyArray<Record<string, unknown>>): FacilitySnapshotOf {
  const byId = new Map<string, Facility>();
  for (const row of rows) {
    const id = row['snapshot.id'];
    if (typeof id !== 'string' || byId.has(id)) continue;
    const facility: Record<string, unknown> = {};
    for (const [c, aliased] of SNAPSHOT_KEYS) facility[c] = row[aliased];
    byId.set(id, toFacility(facility as FacilityRow));
  }
  return snapshotOf(byId);
}

function snapshotOf(byId: Map<string, Facility>): FacilitySnapshotOf {
  return (facilityId) => {
    const f = byId.get(facilityId);
    // Violations reference their facility and cases are written with known facilities only, in
    // this transaction: a missing one is a broken invariant, not a row to publish without it.
    if (!f) throw new Error(`event snapshot: facility ${facilityId} not found`);
    return f;
  };
}
