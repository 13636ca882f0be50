import { eventUuid } from '@fcd/events';
import { type IdSource, traceContextColumn } from '@fcd/service-kit';
import type { CaseStatus, ComplianceStatus } from '../domain/codes';
import { type DomainEvent, events } from '../domain/events';
import type { EnforcementCase, Violation } from '../domain/model';
import {
  CASE_FIELDS,
  type CaseRecord,
  FACILITY_FIELDS,
  type FacilityRecord,
  type RecordKind,
  VIOLATION_FIELDS,
  type ViolationRecord,
} from '../domain/records';
import type { Queryable } from './queries';
import { CASE_COLUMNS, type CaseRow, FACILITY_COLUMNS, type FacilityRow, toCase, toFacility, toViolation, type ViolationRow } from './rows';
import { facilitySnapshots, snapshotColumns, snapshotsOf } from './snapshots';
import { insertedRow, sqlColumns, type UpsertSpec, upsertStatement } from './upsert';

/**
 * The write side of ingestion: batched multi-row upserts keyed on the natural
 * keys, each reporting what actually changed, and the outbox rows for the
 * domain events of those changes, written in the caller's transaction.
 *
 * Every ingesting transaction first takes one advisory lock, so writers are
 * serialised and each batch sees the rows the previous one committed: the
 * "previous status" read before an upsert is the one it replaces.
 */

/** Where a row came from: the line of an import file, or the position in a JSON array. */
export interface RowRef {
  line?: number;
  index?: number;
}

export interface Staged<T> {
  ref: RowRef;
  record: T;
}

export interface RowError extends RowRef {
  kind: RecordKind;
  field: string;
  message: string;
}

export interface BatchOutcome {
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  errors: RowError[];
  events: DomainEvent[];
}

export interface WriteContext {
  client: Queryable;
  /** ISO timestamp of this transaction: updated_at of changed rows and created_at of its events. */
  now: string;
  ids: IdSource;
}

/**
 * The ingestion lock (key 'facility:ingest'), parameterless so that it can go out with its
 * transaction's BEGIN (`withTransactionFrom`).
 */
export const LOCK_INGESTION_SQL = "SELECT pg_advisory_xact_lock(hashtext('facility:ingest'))";

export async function lockIngestion(client: Queryable): Promise<void> {
  await client.query(LOCK_INGESTION_SQL);
}

/**
 * The upserts, their columns from the resources' fields (domain/records.ts): a violation is stored
 * with its facility's id instead of the registry_id, a case with its facilities' ids.
 */
const UPSERT_FACILITIES = upsertStatement({
  table: 'facilities',
  alias: 'f',
  key: 'registry_id',
  columns: sqlColumns(FACILITY_FIELDS),
  returning: FACILITY_COLUMNS.replace(/(\w+)/g, 'f.$1'),
  previous: 'compliance_status',
  stamps: ['data_as_of'],
});
const VIOLATION_COLUMNS: Array<[string, string]> = [['source_id', 'text'], ['facility_id', 'uuid'], ...sqlColumns(VIOLATION_FIELDS)];
const VIOLATIONS_JOIN = 'JOIN facilities f ON f.id = up.facility_id';
const UPSERT_VIOLATIONS_SPEC = {
  table: 'violations',
  alias: 'v',
  key: 'source_id',
  columns: VIOLATION_COLUMNS,
  returning: ['id', ...VIOLATION_COLUMNS.map(([c]) => c)].map((c) => `v.${c}`).join(', '),
} satisfies Omit<UpsertSpec, 'join'>;
const UPSERT_VIOLATIONS = upsertStatement({
  ...UPSERT_VIOLATIONS_SPEC,
  join: { from: VIOLATIONS_JOIN, select: 'f.name AS facility_name' },
});
/**
 * The same, each new violation with its facility's snapshot (snapshotColumns), for a chunk of at
 * most SNAPSHOTS_IN_UPSERT_MAX accepted rows: one round trip less than a query of the snapshots
 * after it (an ingestion request of a few rows). A larger chunk reads them with that query, once
 * per facility: 24 columns more on each of many new rows cost Node more than the round trip saves
 * (about 13 µs a row against 250 µs, 1,000 new violations of 20 facilities;
 * docs/benchmarks/history/2026-11-30.md).
 */
const UPSERT_VIOLATIONS_WITH_SNAPSHOTS = upsertStatement({
  ...UPSERT_VIOLATIONS_SPEC,
  join: { from: VIOLATIONS_JOIN, select: `f.name AS facility_name, ${snapshotColumns(insertedRow('source_id'))}` },
});
export const SNAPSHOTS_IN_UPSERT_MAX = 20;
const UPSERT_CASES = upsertStatement({
  table: 'cases',
  alias: 'c',
  key: 'case_number',
  columns: [...sqlColumns(CASE_FIELDS), ['facility_ids', 'uuid[]']],
  returning: CASE_COLUMNS.replace(/(\w+)/g, 'c.$1'),
  previous: 'status',
});

function outcome(): BatchOutcome {
  return { inserted: 0, updated: 0, unchanged: 0, rejected: 0, errors: [], events: [] };
}

async function facilityIdsByRegistry(client: Queryable, registryIds: string[]): Promise<Map<string, string>> {
  const { rows } = await client.query<{ registry_id: string; id: string }>(
    'SELECT registry_id, id FROM facilities WHERE registry_id = ANY($1::text[])',
    [[...new Set(registryIds)]],
  );
  return new Map(rows.map((r) => [r.registry_id, r.id]));
}

export async function upsertFacilities(ctx: WriteContext, rows: Staged<FacilityRecord>[]): Promise<BatchOutcome> {
  const out = outcome();
  if (rows.length === 0) return out;
  const input = rows.map((r) => ({ new_id: ctx.ids(), ...r.record }));
  const { rows: changed } = await ctx.client.query<FacilityRow & { previous_status: ComplianceStatus | null; inserted: boolean }>(
    UPSERT_FACILITIES,
    [JSON.stringify(input), ctx.now],
  );
  const byKey = new Map(changed.map((c) => [c.registry_id, c]));
  for (const r of rows) {
    const c = byKey.get(r.record.registry_id);
    if (!c) {
      out.unchanged++;
      continue;
    }
    if (c.inserted) {
      out.inserted++;
      continue;
    }
    out.updated++;
    if (c.previous_status !== null && c.previous_status !== c.compliance_status) {
      out.events.push(events.facilityStatusChanged(toFacility(c), c.previous_status, ctx.now, ctx.ids));
    }
  }
  return out;
}

export async function upsertViolations(ctx: WriteContext, rows: Staged<ViolationRecord>[]): Promise<BatchOutcome> {
  const out = outcome();
  if (rows.length === 0) return out;
  const facilityIds = await facilityIdsByRegistry(
    ctx.client,
    rows.map((r) => r.record.registry_id),
  );
  const input: Array<Record<string, unknown>> = [];
  const accepted: Staged<ViolationRecord>[] = [];
  for (const r of rows) {
    const facility_id = facilityIds.get(r.record.registry_id);
    if (!facility_id) {
      out.rejected++;
      out.errors.push({ kind: 'violations', ...r.ref, field: 'registry_id', message: 'names no known facility' });
      continue;
    }
    const { registry_id: _r, ...rest } = r.record;
    input.push({ new_id: ctx.ids(), facility_id, ...rest });
    accepted.push(r);
  }
  if (input.length === 0) return out;
  const withSnapshots = input.length <= SNAPSHOTS_IN_UPSERT_MAX;
  const statement = withSnapshots ? UPSERT_VIOLATIONS_WITH_SNAPSHOTS : UPSERT_VIOLATIONS;
  const { rows: changed } = await ctx.client.query<ViolationRow & { source_id: string; inserted: boolean }>(statement, [
    JSON.stringify(input),
    ctx.now,
  ]);
  const byKey = new Map(changed.map((c) => [c.source_id, c]));
  const added: Violation[] = [];
  const addedRows: typeof changed = [];
  for (const r of accepted) {
    const c = byKey.get(r.record.source_id);
    if (!c) out.unchanged++;
    else if (c.inserted) {
      out.inserted++;
      added.push(toViolation(c));
      addedRows.push(c);
    } else out.updated++;
  }
  if (added.length > 0) {
    const snapshot = withSnapshots
      ? snapshotsOf(addedRows)
      : await facilitySnapshots(
          ctx.client,
          added.map((v) => v.facility_id),
        );
    for (const v of added) out.events.push(events.violationNew(v, snapshot, ctx.now, ctx.ids));
  }
  return out;
}

export async function upsertCases(ctx: WriteContext, rows: Staged<CaseRecord>[]): Promise<BatchOutcome> {
  const out = outcome();
  if (rows.length === 0) return out;
  const facilityIds = await facilityIdsByRegistry(
    ctx.client,
    rows.flatMap((r) => r.record.registry_ids),
  );
  const input: Array<Record<string, unknown>> = [];
  const accepted: Staged<CaseRecord>[] = [];
  for (const r of rows) {
    const unknown = r.record.registry_ids.filter((id) => !facilityIds.has(id));
    if (unknown.length > 0) {
      out.rejected++;
      out.errors.push({ kind: 'cases', ...r.ref, field: 'registry_ids', message: `name no known facility: ${unknown.join(', ')}` });
      continue;
    }
    const { registry_ids, ...rest } = r.record;
    const facility_ids = [...new Set(registry_ids.map((id) => facilityIds.get(id) as string))].sort();
    input.push({ new_id: ctx.ids(), facility_ids, ...rest });
    accepted.push(r);
  }
  if (input.length === 0) return out;
  const { rows: changed } = await ctx.client.query<CaseRow & { previous_status: CaseStatus | null; inserted: boolean }>(UPSERT_CASES, [
    JSON.stringify(input),
    ctx.now,
  ]);
  const byKey = new Map(changed.map((c) => [c.case_number, c]));
  // The events in row order, built once their facilities' snapshots are read (one query).
  const pending: Array<{ c: EnforcementCase; previous?: CaseStatus }> = [];
  for (const r of accepted) {
    const c = byKey.get(r.record.case_number);
    if (!c) out.unchanged++;
    else if (c.inserted) {
      out.inserted++;
      pending.push({ c: toCase(c) });
    } else {
      out.updated++;
      if (c.previous_status !== null && c.previous_status !== c.status) pending.push({ c: toCase(c), previous: c.previous_status });
    }
  }
  if (pending.length > 0) {
    const snapshot = await facilitySnapshots(
      ctx.client,
      pending.flatMap((p) => p.c.facility_ids),
    );
    for (const { c, previous } of pending) {
      out.events.push(
        previous === undefined
          ? events.caseNew(c, snapshot, ctx.now, ctx.ids)
          : events.caseUpdated(c, previous, snapshot, ctx.now, ctx.ids),
      );
    }
  }
  return out;
}

/** Writes the outbox rows of the events, in order, in the caller's transaction, with the active trace context. */
export async function writeOutbox(client: Queryable, evts: DomainEvent[]): Promise<void> {
  if (evts.length === 0) return;
  await client.query(
    `INSERT INTO outbox (id, type, payload, created_at, trace_context)
     SELECT id, type, payload, created_at, $5
       FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS t(id, type, payload, created_at, n)
      ORDER BY n`,
    [
      evts.map((e) => eventUuid(e.id)),
      evts.map((e) => e.type),
      evts.map((e) => JSON.stringify(e)),
      evts.map((e) => e.created_at),
      traceContextColumn(),
    ],
  );
}
