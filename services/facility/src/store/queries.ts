import { fetchSize, type KeysetPage, keysetPage, type PageRequest, takeRows } from '@fcd/service-kit';
import type { CaseStatus, CaseType, Program, Severity } from '../domain/codes';
import { caseList, type DatedKey, violationList } from '../domain/cursor';
import type { EnforcementCase, Facility, Violation } from '../domain/model';
import {
  CASE_COLUMNS,
  type CaseRow,
  FACILITY_COLUMNS,
  type FacilityRow,
  toCase,
  toFacility,
  toViolation,
  VIOLATION_COLUMNS,
  type ViolationRow,
} from './rows';
import { mapPage, type Queryable, Where } from './sql';

export * from './facility-list';
export type { Queryable } from './sql';

// Built once: a template literal in the function would build (and pg flatten) the long column list
// on every read.
const FACILITY_BY_ID = `SELECT ${FACILITY_COLUMNS} FROM facilities WHERE id = $1`;
const CASE_BY_ID = `SELECT ${CASE_COLUMNS} FROM cases WHERE id = $1`;

export async function getFacility(db: Queryable, id: string): Promise<Facility | undefined> {
  const { rows } = await db.query<FacilityRow>(FACILITY_BY_ID, [id]);
  return rows[0] ? toFacility(rows[0]) : undefined;
}

export async function facilityExists(db: Queryable, id: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM facilities WHERE id = $1', [id]);
  return rows.length > 0;
}

/** The subset of ids that name existing facilities (ids must be well-formed UUIDs). */
export async function existingFacilityIds(db: Queryable, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ id: string }>('SELECT id FROM facilities WHERE id = ANY($1::uuid[])', [ids]);
  const found = new Set(rows.map((r) => r.id));
  return [...new Set(ids.map((i) => i.toLowerCase()))].filter((i) => found.has(i));
}

export interface ViolationFilter {
  facility_id?: string;
  program?: Program;
  severity?: Severity;
  since?: string;
}

const VIOLATIONS = violationList<ViolationRow>();

/** One page of violations, newest first (keysetPage: the request's limit and cursor checked). */
export async function listViolations(db: Queryable, f: ViolationFilter, request: PageRequest): Promise<KeysetPage<Violation>> {
  const page = await keysetPage(VIOLATIONS, request, (limit, after) => violationRows(db, f, limit, after));
  return mapPage(page, toViolation);
}

async function violationRows(db: Queryable, f: ViolationFilter, limit: number, after: DatedKey | undefined) {
  const w = new Where();
  if (f.facility_id) w.add((p) => `v.facility_id = ${p}`, f.facility_id);
  if (f.program) w.add((p) => `v.program = ${p}`, f.program);
  if (f.severity) w.add((p) => `v.severity = ${p}`, f.severity);
  if (f.since) w.add((p) => `v.violation_date >= ${p}::date`, f.since);
  if (after) w.add((d, i) => `(v.violation_date, v.id) < (${d}::date, ${i}::uuid)`, after.date, after.id);
  const limitRef = w.param(fetchSize(limit));
  const { rows } = await db.query<ViolationRow>(
    `SELECT ${VIOLATION_COLUMNS}
       FROM violations v JOIN facilities f ON f.id = v.facility_id
       ${w}
      ORDER BY v.violation_date DESC, v.id DESC
      LIMIT ${limitRef}`,
    w.params,
  );
  return takeRows(rows, limit);
}

export interface CaseFilter {
  facility_id?: string;
  status?: CaseStatus;
  case_type?: CaseType;
  since?: string;
}

const CASES = caseList<CaseRow>();

/** One page of enforcement cases, newest first (keysetPage: the request's limit and cursor checked). */
export async function listCases(db: Queryable, f: CaseFilter, request: PageRequest): Promise<KeysetPage<EnforcementCase>> {
  const page = await keysetPage(CASES, request, (limit, after) => caseRows(db, f, limit, after));
  return mapPage(page, toCase);
}

async function caseRows(db: Queryable, f: CaseFilter, limit: number, after: DatedKey | undefined) {
  const w = new Where();
  if (f.facility_id) w.add((p) => `facility_ids @> ARRAY[${p}]::uuid[]`, f.facility_id);
  if (f.status) w.add((p) => `status = ${p}`, f.status);
  if (f.case_type) w.add((p) => `case_type = ${p}`, f.case_type);
  if (f.since) w.add((p) => `filed_date >= ${p}::date`, f.since);
  if (after) w.add((d, i) => `(filed_date, id) < (${d}::date, ${i}::uuid)`, after.date, after.id);
  const limitRef = w.param(fetchSize(limit));
  const { rows } = await db.query<CaseRow>(
    `SELECT ${CASE_COLUMNS} FROM cases ${w} ORDER BY filed_date DESC, id DESC LIMIT ${limitRef}`,
    w.params,
  );
  return takeRows(rows, limit);
}

export async function getCase(db: Queryable, id: string): Promise<EnforcementCase | undefined> {
  const { rows } = await db.query<CaseRow>(CASE_BY_ID, [id]);
  return rows[0] ? toCase(rows[0]) : undefined;
}
