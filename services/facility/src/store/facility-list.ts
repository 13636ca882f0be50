import { fetchSize, type KeysetList, type KeysetPage, keysetPage, type PageRequest, takeRows, validationError } from '@fcd/service-kit';
import type { ComplianceStatus, Program } from '../domain/codes';
import { type FacilityKey, facilityList, type NearKey, nearList, type SortedKey, sortedList } from '../domain/cursor';
import type { Facility } from '../domain/model';
import { FACILITY_COLUMNS, type FacilityRow, toFacility } from './rows';
import { likeContains, mapPage, type Queryable, Where } from './sql';

/**
 * The facility list (GET /v1/facilities, docs/api.md "Filters and sorting"): its filters, shared
 * with the export, its orders, each with its own cursor codec, the search by place and the change
 * feed of `updated_since`, paged by service-kit's keysetPage.
 */

/** A bounding box in decimal degrees (`bbox=minLon,minLat,maxLon,maxLat`). */
export interface BoundingBox {
  min_lon: number;
  min_lat: number;
  max_lon: number;
  max_lat: number;
}

/** The facility list's filters (docs/api.md, "Filters and sorting"); every one given must hold. */
export interface FacilityFilter {
  state?: string;
  program?: Program;
  compliance_status?: ComplianceStatus;
  q?: string;
  city?: string;
  county?: string;
  /** Five digits: the ZIP code's first five (a stored ZIP+4 matches its ZIP). */
  zip?: string;
  epa_region?: string;
  bbox?: BoundingBox;
  /** 2 to 6 digits: a facility matches when one of its NAICS codes starts with them. */
  naics?: string;
  sic?: string;
  major?: boolean;
  min_quarters_nc?: number;
  snc?: boolean;
  min_penalties_usd?: number;
  penalized_since?: string;
  inspected_since?: string;
  not_inspected_since?: string;
  /** An ISO instant: facilities whose updated_at is after it. */
  updated_since?: string;
}

/**
 * The SQL expressions of the profile values the filters and sorts read, each exactly as an index
 * of migration 0009 names it (the planner matches index expressions textually). A missing value is
 * a sentinel that sorts last in the sort's order: -1 for counts and amounts (sorted descending,
 * never negative), '9999-99-99' for a date (sorted ascending; ISO dates compare as C-collated text).
 */
const PROFILE_SQL = {
  quarters_nc: "coalesce((compliance ->> 'quarters_with_noncompliance')::integer, -1)",
  penalties_total: "coalesce((penalties ->> 'total_usd')::numeric, -1)",
  penalized: '((penalties ->> \'last_date\') COLLATE "C")',
  last_inspection: "(coalesce(inspections ->> 'last_date', '9999-99-99') COLLATE \"C\")",
  snc: "((compliance ->> 'snc')::boolean)",
  naics_prefixes: 'naics_prefixes(naics_codes)',
} as const;

const NO_DATE = "'9999-99-99'";

/** The conditions of `f`, their values bound through `param` (shared by the lists and the export). */
export function facilityConditions(f: FacilityFilter, param: (value: unknown) => string): string[] {
  const out: string[] = [];
  if (f.state) out.push(`state = ${param(f.state)}`);
  if (f.program) out.push(`programs @> ARRAY[${param(f.program)}]::text[]`);
  if (f.compliance_status) out.push(`compliance_status = ${param(f.compliance_status)}`);
  if (f.q) out.push(`name ILIKE ${param(likeContains(f.q))}`);
  if (f.city) out.push(`lower(city) = lower(${param(f.city)})`);
  if (f.county) out.push(`lower(county) = lower(${param(f.county)})`);
  if (f.zip) out.push(`left(zip, 5) = ${param(f.zip)}`);
  if (f.epa_region) out.push(`epa_region = ${param(f.epa_region)}`);
  if (f.bbox) {
    const b = f.bbox;
    out.push(`latitude BETWEEN ${param(b.min_lat)}::float8 AND ${param(b.max_lat)}::float8`);
    out.push(`longitude BETWEEN ${param(b.min_lon)}::float8 AND ${param(b.max_lon)}::float8`);
  }
  if (f.naics) out.push(`${PROFILE_SQL.naics_prefixes} @> ARRAY[${param(f.naics)}]::text[]`);
  if (f.sic) out.push(`sic_codes @> ARRAY[${param(f.sic)}]::text[]`);
  if (f.major !== undefined) out.push(`major = ${param(f.major)}`);
  if (f.min_quarters_nc !== undefined) out.push(`${PROFILE_SQL.quarters_nc} >= ${param(f.min_quarters_nc)}::integer`);
  if (f.snc !== undefined) out.push(`${PROFILE_SQL.snc} = ${param(f.snc)}`);
  if (f.min_penalties_usd !== undefined) out.push(`${PROFILE_SQL.penalties_total} >= ${param(f.min_penalties_usd)}::numeric`);
  if (f.penalized_since) out.push(`${PROFILE_SQL.penalized} >= ${param(f.penalized_since)}`);
  if (f.inspected_since)
    out.push(`${PROFILE_SQL.last_inspection} >= ${param(f.inspected_since)} AND ${PROFILE_SQL.last_inspection} < ${NO_DATE}`);
  if (f.not_inspected_since)
    out.push(`(${PROFILE_SQL.last_inspection} < ${param(f.not_inspected_since)} OR ${PROFILE_SQL.last_inspection} = ${NO_DATE})`);
  if (f.updated_since) out.push(`updated_at > ${param(f.updated_since)}::timestamptz`);
  return out;
}

/** The orders of the facility list: `registry_id` when no sort is asked, `distance` with `near`. */
export const FACILITY_SORTS = ['name', '-penalties_total', '-quarters_nc', 'last_inspection', 'distance'] as const;
export type FacilitySort = (typeof FACILITY_SORTS)[number] | 'registry_id';
/** The orders of a list: the public sorts, and the change feed of `updated_since`. */
type Order = FacilitySort | 'changes';

/** A sort by one value: its SQL expression, direction (ties by registry_id the same way) and cursor. */
interface ValueSort {
  expr: string;
  /** The cast of a cursor's value back to the expression's type. */
  cast: string;
  descending: boolean;
  list: KeysetList<SortedKey, SortedRow>;
}

type SortedRow = FacilityRow & { sort_value: string | number; distance_m?: number };

const VALUE_SORTS: Record<Exclude<FacilitySort, 'registry_id' | 'distance'>, ValueSort> = {
  name: { expr: 'name', cast: 'text', descending: false, list: sortedList('fn1', 'text') },
  '-penalties_total': { expr: PROFILE_SQL.penalties_total, cast: 'numeric', descending: true, list: sortedList('fp1', 'decimal') },
  '-quarters_nc': { expr: PROFILE_SQL.quarters_nc, cast: 'integer', descending: true, list: sortedList('fq1', 'integer') },
  last_inspection: { expr: PROFILE_SQL.last_inspection, cast: 'text', descending: false, list: sortedList('fi1', 'date') },
};

/**
 * The change feed (`updated_since`): facilities in the order their writes committed, as far as any
 * reader can tell. change_xid is the id of the transaction that last wrote the row (set by a
 * trigger, migration 0010); a page shows only rows written by transactions older than every
 * transaction still running (`pg_snapshot_xmin` of the statement's snapshot), so a write that
 * commits later has a larger change_xid than any position already passed, and the walk meets it
 * ahead. Polled: the last page names its last row, so a client that keeps the cursor sees every
 * later change too.
 */
const CHANGES: ValueSort = {
  expr: 'change_xid',
  cast: 'xid8',
  descending: false,
  list: sortedList('fu1', 'xid', true),
};
const SETTLED = 'change_xid < pg_snapshot_xmin(pg_current_snapshot())';

/** A search by place: the centre and the radius. */
interface Place {
  latitude: number;
  longitude: number;
  radius_km: number;
}

export interface NearFilter extends FacilityFilter, Place {}

/** One page's query of a search by place: `limit` rows (fetchSize) after the position `after`. */
export interface NearPageQuery extends NearFilter {
  limit: number;
  after?: NearKey | undefined;
}

export type FacilityNear = Facility & { distance_km: number };

/** The facility list's query: filters, an optional place, and the order. */
export interface FacilityListQuery {
  filter: FacilityFilter;
  near?: Place | undefined;
  /** Absent: registry_id, or distance with `near`. */
  sort?: FacilitySort | undefined;
}

type Position = FacilityKey | NearKey | SortedKey;

/**
 * The SQL of one page of facilities: the filters, the place (earth_box(centre, r) @> point is the
 * GiST index's condition, a cube bounding the sphere around the centre; earth_distance, great
 * circle in metres, keeps the exact set), and the order's keyset after `after`.
 */
function facilitySql(query: FacilityListQuery, sort: Order, limit: number, after: Position | undefined) {
  const w = new Where();
  const select = [FACILITY_COLUMNS];
  let distance: string | undefined;
  if (query.near) {
    const centre = `ll_to_earth(${w.param(query.near.latitude)}::float8, ${w.param(query.near.longitude)}::float8)`;
    const radius = `${w.param(query.near.radius_km * 1000)}::float8`;
    // The index condition names the index's expression, facility_point (ll_to_earth's expression with
    // the extensions' schemas qualified; inlined since migration 0006, in the index expression too).
    // Distances use ll_to_earth itself, a plain SQL function call per row (not inlined: it is strict
    // and earth() is not); before 0006, facility_point also set its search_path on every call.
    distance = `earth_distance(${centre}, ll_to_earth(latitude, longitude))`;
    w.add(() => 'latitude IS NOT NULL AND longitude IS NOT NULL');
    w.add(() => `earth_box(${centre}, ${radius}) @> facility_point(latitude, longitude)`);
    w.add(() => `${distance} <= ${radius}`);
    select.push(`${distance} AS distance_m`);
  }
  for (const condition of facilityConditions(query.filter, (v) => w.param(v))) w.add(() => condition);
  let orderBy: string;
  if (sort === 'registry_id') {
    if (after) w.add((p) => `registry_id > ${p}`, (after as FacilityKey).registry_id);
    orderBy = 'registry_id';
  } else if (sort === 'distance') {
    const key = after as NearKey | undefined;
    if (key) w.add((d, r) => `(${distance}, registry_id) > (${d}::float8, ${r}::text)`, key.distance_m, key.registry_id);
    orderBy = 'distance_m, registry_id';
  } else {
    const s = sort === 'changes' ? CHANGES : VALUE_SORTS[sort];
    const key = after as SortedKey | undefined;
    if (sort === 'changes') {
      w.add(() => SETTLED);
      // The first page starts at the oldest change_xid among the rows changed since the instant
      // (found through updated_at's index), not at the start of the change_xid index.
      if (!key)
        w.add(
          (p) => `change_xid >= (SELECT min(change_xid) FROM facilities WHERE updated_at > ${p}::timestamptz)`,
          query.filter.updated_since,
        );
    }
    if (key)
      w.add((v, r) => `(${s.expr}, registry_id) ${s.descending ? '<' : '>'} (${v}::${s.cast}, ${r}::text)`, key.value, key.registry_id);
    select.push(`${s.expr}${s.cast === 'xid8' ? '::text' : ''} AS sort_value`);
    orderBy = s.descending ? `${s.expr} DESC, registry_id DESC` : `${s.expr}, registry_id`;
  }
  const limitRef = w.param(fetchSize(limit));
  return { text: `SELECT ${select.join(', ')} FROM facilities ${w} ORDER BY ${orderBy} LIMIT ${limitRef}`, values: w.params };
}

/** The SQL of one page of `query` in its order (what listFacilities runs; for plans in tests). */
export function facilityQuery(query: FacilityListQuery, limit: number, after?: Position): { text: string; values: unknown[] } {
  return facilitySql(query, orderOf(query), limit, after);
}

/** The SQL of one page of a search by place, nearest first (ties by registry_id). */
export function nearQuery(f: NearPageQuery): { text: string; values: unknown[] } {
  const { limit, after, latitude, longitude, radius_km, ...filter } = f;
  return facilitySql({ filter, near: { latitude, longitude, radius_km } }, 'distance', limit, after);
}

const FACILITIES = facilityList<FacilityRow>();
type NearRow = FacilityRow & { distance_m: number };
const NEAR = nearList<NearRow>();

/** The list (cursor codec) of an order. */
function listOfSort(sort: Order): KeysetList<Position, FacilityRow & Partial<SortedRow>> {
  if (sort === 'registry_id') return FACILITIES as KeysetList<Position, FacilityRow>;
  if (sort === 'changes') return CHANGES.list as unknown as KeysetList<Position, FacilityRow>;
  if (sort === 'distance') return NEAR as unknown as KeysetList<Position, FacilityRow>;
  return VALUE_SORTS[sort].list as unknown as KeysetList<Position, FacilityRow>;
}

/**
 * The order of a list; 400 VALIDATION_ERROR naming `sort` when it needs a place it was not given,
 * or is given with `updated_since` (which has its own order, the change feed).
 */
function orderOf(query: FacilityListQuery): Order {
  if (query.filter.updated_since !== undefined) {
    if (query.sort !== undefined)
      throw validationError([{ field: 'sort', message: 'is not taken with updated_since (changes come in their own order)' }]);
    return 'changes';
  }
  const sort = query.sort ?? (query.near ? 'distance' : 'registry_id');
  if (sort === 'distance' && !query.near) throw validationError([{ field: 'sort', message: 'distance needs near and radius_km' }]);
  return sort;
}

function facilityView(row: FacilityRow & { distance_m?: number }): Facility | FacilityNear {
  const facility = toFacility(row);
  return row.distance_m === undefined ? facility : { ...facility, distance_km: Math.round(row.distance_m) / 1000 };
}

/**
 * One page of facilities (keysetPage: the request's limit and cursor checked; each order has its
 * own cursor codec, so a cursor of one order is a 400 under another).
 */
export async function listFacilities(
  db: Queryable,
  query: FacilityListQuery,
  request: PageRequest,
): Promise<KeysetPage<Facility | FacilityNear>> {
  const sort = orderOf(query);
  const page = await keysetPage(listOfSort(sort), request, async (limit, after) => {
    const { text, values } = facilitySql(query, sort, limit, after);
    const { rows } = await db.query<FacilityRow & { distance_m?: number; sort_value?: string | number }>(text, values);
    return takeRows(rows, limit);
  });
  return mapPage(page, facilityView);
}

/** One page of a search by place, nearest first (keysetPage: the request's limit and cursor checked). */
export async function listFacilitiesNear(db: Queryable, f: NearFilter, request: PageRequest): Promise<KeysetPage<FacilityNear>> {
  const { latitude, longitude, radius_km, ...filter } = f;
  return (await listFacilities(db, { filter, near: { latitude, longitude, radius_km } }, request)) as KeysetPage<FacilityNear>;
}
