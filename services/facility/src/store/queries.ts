import { fetchSize, type KeysetPage, keysetPage, type PageRequest, takeRows } from '@fcd/service-kit';
import type { CaseStatus, CaseType, ComplianceStatus, Program, Severity } from '../domain/codes';
import { caseList, type DatedKey, type FacilityKey, facilityList, type NearKey, nearList, violationList } from '../domain/cursor';
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

/** Anything that runs a query: a pg.Pool or a client inside a transaction. */
export interface Queryable {
  query<R extends object = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** Builds a parameterised WHERE clause. */
class Where {
  readonly params: unknown[] = [];
  private readonly parts: string[] = [];

  add(sqlWithPlaceholders: (...refs: string[]) => string, ...values: unknown[]): void {
    const refs = values.map((v) => {
      this.params.push(v);
      return `$${this.params.length}`;
    });
    this.parts.push(sqlWithPlaceholders(...refs));
  }

  param(value: unknown): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }

  toString(): string {
    return this.parts.length === 0 ? '' : `WHERE ${this.parts.join(' AND ')}`;
  }
}

/** Escapes LIKE wildcards so q is matched literally. */
function likeContains(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A page of rows as their public view (the cursor was named from the rows, before mapping). */
function mapPage<R, T>(page: KeysetPage<R>, map: (r: R) => T): KeysetPage<T> {
  return { ...page, items: page.items.map(map) };
}

export interface FacilityFilter {
  state?: string;
  program?: Program;
  compliance_status?: ComplianceStatus;
  q?: string;
}

const FACILITIES = facilityList<FacilityRow>();

/** One page of facilities by registry_id (keysetPage: the request's limit and cursor checked). */
export async function listFacilities(db: Queryable, f: FacilityFilter, request: PageRequest): Promise<KeysetPage<Facility>> {
  const page = await keysetPage(FACILITIES, request, (limit, after) => facilityRows(db, f, limit, after));
  return mapPage(page, toFacility);
}

async function facilityRows(db: Queryable, f: FacilityFilter, limit: number, after: FacilityKey | undefined) {
  const w = new Where();
  if (f.state) w.add((p) => `state = ${p}`, f.state);
  if (f.program) w.add((p) => `programs @> ARRAY[${p}]::text[]`, f.program);
  if (f.compliance_status) w.add((p) => `compliance_status = ${p}`, f.compliance_status);
  if (f.q) w.add((p) => `name ILIKE ${p}`, likeContains(f.q));
  if (after) w.add((p) => `registry_id > ${p}`, after.registry_id);
  const limitRef = w.param(fetchSize(limit));
  const { rows } = await db.query<FacilityRow>(
    `SELECT ${FACILITY_COLUMNS} FROM facilities ${w} ORDER BY registry_id LIMIT ${limitRef}`,
    w.params,
  );
  return takeRows(rows, limit);
}

export interface NearFilter extends FacilityFilter {
  latitude: number;
  longitude: number;
  radius_km: number;
}

/** One page's query of a search by place: `limit` rows (fetchSize) after the position `after`. */
export interface NearPageQuery extends NearFilter {
  limit: number;
  after?: NearKey | undefined;
}

export type FacilityNear = Facility & { distance_km: number };

/**
 * Facilities within radius_km of a point, nearest first (ties by registry_id), with the other
 * filters. earth_box(centre, r) @> point is the GiST index's condition (a cube bounding the
 * sphere around the centre); earth_distance (great circle, metres) then keeps the exact set and orders it.
 */
export function nearQuery(f: NearPageQuery): { text: string; values: unknown[] } {
  const w = new Where();
  const centre = `ll_to_earth(${w.param(f.latitude)}::float8, ${w.param(f.longitude)}::float8)`;
  const radius = `${w.param(f.radius_km * 1000)}::float8`;
  // The index condition names the index's expression, facility_point (ll_to_earth's expression with
  // the extensions' schemas qualified; inlined since migration 0006, in the index expression too).
  // Distances use ll_to_earth itself, a plain SQL function call per row (not inlined: it is strict
  // and earth() is not); before 0006, facility_point also set its search_path on every call.
  const distance = `earth_distance(${centre}, ll_to_earth(latitude, longitude))`;
  w.add(() => 'latitude IS NOT NULL AND longitude IS NOT NULL');
  w.add(() => `earth_box(${centre}, ${radius}) @> facility_point(latitude, longitude)`);
  w.add(() => `${distance} <= ${radius}`);
  if (f.state) w.add((p) => `state = ${p}`, f.state);
  if (f.program) w.add((p) => `programs @> ARRAY[${p}]::text[]`, f.program);
  if (f.compliance_status) w.add((p) => `compliance_status = ${p}`, f.compliance_status);
  if (f.q) w.add((p) => `name ILIKE ${p}`, likeContains(f.q));
  if (f.after) w.add((d, r) => `(${distance}, registry_id) > (${d}::float8, ${r}::text)`, f.after.distance_m, f.after.registry_id);
  const limitRef = w.param(fetchSize(f.limit));
  return {
    text: `SELECT ${FACILITY_COLUMNS}, ${distance} AS distance_m FROM facilities ${w} ORDER BY distance_m, registry_id LIMIT ${limitRef}`,
    values: w.params,
  };
}

type NearRow = FacilityRow & { distance_m: number };
const NEAR = nearList<NearRow>();

/** One page of a search by place, nearest first (keysetPage: the request's limit and cursor checked). */
export async function listFacilitiesNear(db: Queryable, f: NearFilter, request: PageRequest): Promise<KeysetPage<FacilityNear>> {
  const page = await keysetPage(NEAR, request, async (limit, after) => {
    const { text, values } = nearQuery({ ...f, limit, after });
    const { rows } = await db.query<NearRow>(text, values);
    return takeRows(rows, limit);
  });
  return mapPage(page, (r) => ({ ...toFacility(r), distance_km: Math.round(r.distance_m) / 1000 }));
}

export async function getFacility(db: Queryable, id: string): Promise<Facility | undefined> {
  const { rows } = await db.query<FacilityRow>(`SELECT ${FACILITY_COLUMNS} FROM facilities WHERE id = $1`, [id]);
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
  const { rows } = await db.query<CaseRow>(`SELECT ${CASE_COLUMNS} FROM cases WHERE id = $1`, [id]);
  return rows[0] ? toCase(rows[0]) : undefined;
}
