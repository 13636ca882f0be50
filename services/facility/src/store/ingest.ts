import { eventUuid } from '@fcd/events';
import { type IdSource, traceContextColumn } from '@fcd/service-kit';
import type { CaseStatus, ComplianceStatus } from '../domain/codes';
import { type DomainEvent, events } from '../domain/events';
import type { CaseRecord, FacilityRecord, RecordKind, ViolationRecord } from '../domain/records';
import type { Queryable } from './queries';
import { CASE_COLUMNS, type CaseRow, FACILITY_COLUMNS, type FacilityRow, toCase, toFacility, toViolation, type ViolationRow } from './rows';

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

const INGEST_LOCK_KEY = 'facility:ingest';

export async function lockIngestion(client: Queryable): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [INGEST_LOCK_KEY]);
}

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
  const cols =
    'name, street, city, state, zip, county, latitude, longitude, naics_codes, programs, compliance_status, last_inspection_date';
  const { rows: changed } = await ctx.client.query<FacilityRow & { previous_status: ComplianceStatus | null; inserted: boolean }>(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(
         new_id uuid, registry_id text, name text, street text, city text, state text, zip text, county text,
         latitude float8, longitude float8, naics_codes text[], programs text[], compliance_status text, last_inspection_date date)
     ),
     old AS (
       SELECT f.registry_id, f.compliance_status FROM facilities f JOIN input i ON i.registry_id = f.registry_id
     ),
     up AS (
       INSERT INTO facilities AS f (id, registry_id, ${cols}, updated_at)
       SELECT new_id, registry_id, ${cols}, $2::timestamptz FROM input
       ON CONFLICT (registry_id) DO UPDATE SET
         name = EXCLUDED.name, street = EXCLUDED.street, city = EXCLUDED.city, state = EXCLUDED.state,
         zip = EXCLUDED.zip, county = EXCLUDED.county, latitude = EXCLUDED.latitude, longitude = EXCLUDED.longitude,
         naics_codes = EXCLUDED.naics_codes, programs = EXCLUDED.programs, compliance_status = EXCLUDED.compliance_status,
         last_inspection_date = EXCLUDED.last_inspection_date, updated_at = EXCLUDED.updated_at
       WHERE (f.name, f.street, f.city, f.state, f.zip, f.county, f.latitude, f.longitude, f.naics_codes, f.programs,
              f.compliance_status, f.last_inspection_date)
         IS DISTINCT FROM
             (EXCLUDED.name, EXCLUDED.street, EXCLUDED.city, EXCLUDED.state, EXCLUDED.zip, EXCLUDED.county,
              EXCLUDED.latitude, EXCLUDED.longitude, EXCLUDED.naics_codes, EXCLUDED.programs,
              EXCLUDED.compliance_status, EXCLUDED.last_inspection_date)
       RETURNING ${FACILITY_COLUMNS.replace(/(\w+)/g, 'f.$1')}
     )
     SELECT up.*, old.compliance_status AS previous_status, (old.registry_id IS NULL) AS inserted
       FROM up LEFT JOIN old ON old.registry_id = up.registry_id`,
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
  const cols = 'facility_id, program, violation_type, violation_date, severity, description, resolved_date';
  const { rows: changed } = await ctx.client.query<ViolationRow & { source_id: string; inserted: boolean }>(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(
         new_id uuid, source_id text, facility_id uuid, program text, violation_type text, violation_date date,
         severity text, description text, resolved_date date)
     ),
     old AS (
       SELECT v.source_id FROM violations v JOIN input i ON i.source_id = v.source_id
     ),
     up AS (
       INSERT INTO violations AS v (id, source_id, ${cols}, updated_at)
       SELECT new_id, source_id, ${cols}, $2::timestamptz FROM input
       ON CONFLICT (source_id) DO UPDATE SET
         facility_id = EXCLUDED.facility_id, program = EXCLUDED.program, violation_type = EXCLUDED.violation_type,
         violation_date = EXCLUDED.violation_date, severity = EXCLUDED.severity, description = EXCLUDED.description,
         resolved_date = EXCLUDED.resolved_date, updated_at = EXCLUDED.updated_at
       WHERE (v.facility_id, v.program, v.violation_type, v.violation_date, v.severity, v.description, v.resolved_date)
         IS DISTINCT FROM
             (EXCLUDED.facility_id, EXCLUDED.program, EXCLUDED.violation_type, EXCLUDED.violation_date,
              EXCLUDED.severity, EXCLUDED.description, EXCLUDED.resolved_date)
       RETURNING v.id, v.source_id, ${cols.replace(/(\w+)/g, 'v.$1')}
     )
     SELECT up.*, f.name AS facility_name, (old.source_id IS NULL) AS inserted
       FROM up JOIN facilities f ON f.id = up.facility_id LEFT JOIN old ON old.source_id = up.source_id`,
    [JSON.stringify(input), ctx.now],
  );
  const byKey = new Map(changed.map((c) => [c.source_id, c]));
  for (const r of accepted) {
    const c = byKey.get(r.record.source_id);
    if (!c) out.unchanged++;
    else if (c.inserted) {
      out.inserted++;
      out.events.push(events.violationNew(toViolation(c), ctx.now, ctx.ids));
    } else out.updated++;
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
  const cols = 'case_type, status, lead_agency, filed_date, settled_date, penalty_amount_usd, facility_ids';
  const { rows: changed } = await ctx.client.query<CaseRow & { previous_status: CaseStatus | null; inserted: boolean }>(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(
         new_id uuid, case_number text, case_type text, status text, lead_agency text, filed_date date,
         settled_date date, penalty_amount_usd numeric, facility_ids uuid[])
     ),
     old AS (
       SELECT c.case_number, c.status FROM cases c JOIN input i ON i.case_number = c.case_number
     ),
     up AS (
       INSERT INTO cases AS c (id, case_number, ${cols}, updated_at)
       SELECT new_id, case_number, ${cols}, $2::timestamptz FROM input
       ON CONFLICT (case_number) DO UPDATE SET
         case_type = EXCLUDED.case_type, status = EXCLUDED.status, lead_agency = EXCLUDED.lead_agency,
         filed_date = EXCLUDED.filed_date, settled_date = EXCLUDED.settled_date,
         penalty_amount_usd = EXCLUDED.penalty_amount_usd, facility_ids = EXCLUDED.facility_ids,
         updated_at = EXCLUDED.updated_at
       WHERE (c.case_type, c.status, c.lead_agency, c.filed_date, c.settled_date, c.penalty_amount_usd, c.facility_ids)
         IS DISTINCT FROM
             (EXCLUDED.case_type, EXCLUDED.status, EXCLUDED.lead_agency, EXCLUDED.filed_date, EXCLUDED.settled_date,
              EXCLUDED.penalty_amount_usd, EXCLUDED.facility_ids)
       RETURNING ${CASE_COLUMNS.replace(/(\w+)/g, 'c.$1')}
     )
     SELECT up.*, old.status AS previous_status, (old.case_number IS NULL) AS inserted
       FROM up LEFT JOIN old ON old.case_number = up.case_number`,
    [JSON.stringify(input), ctx.now],
  );
  const byKey = new Map(changed.map((c) => [c.case_number, c]));
  for (const r of accepted) {
    const c = byKey.get(r.record.case_number);
    if (!c) out.unchanged++;
    else if (c.inserted) {
      out.inserted++;
      out.events.push(events.caseNew(toCase(c), ctx.now, ctx.ids));
    } else {
      out.updated++;
      if (c.previous_status !== null && c.previous_status !== c.status) {
        out.events.push(events.caseUpdated(toCase(c), c.previous_status, ctx.now, ctx.ids));
      }
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
