import { StringEnum, validationError } from '@fcd/service-kit';
import { type Static, Type } from '@sinclair/typebox';
import type { ComplianceStatus, Program } from '../domain/codes';
import { isCalendarDate } from '../domain/records';
import { type BoundingBox, FACILITY_SORTS, type FacilityFilter } from '../store/queries';

/**
 * The facility filters of `GET /v1/facilities` and `GET /v1/exports/facilities` (docs/api.md,
 * "Filters and sorting"): their query-string schema, the messages of their checks, and the
 * filter they make. Filters combine with AND; a bad value is a 400 VALIDATION_ERROR naming it.
 */

/** A day, years 0001–9999: what a Postgres date holds and ISO 8601 writes with four digits (year 0000 is refused). */
export const Since = Type.String({ format: 'date', formatMinimum: '0001-01-01', description: 'YYYY-MM-DD, 0001-01-01 to 9999-12-31' });

/** Text Postgres takes: no NUL character. */
const NO_NUL = '^[^\\u0000]*$';

/** The messages of the filters' `pattern` checks, by parameter. */
export const PATTERN_MESSAGES: Record<string, string> = {
  city: 'must be text without NUL characters',
  county: 'must be text without NUL characters',
  zip: 'must be a 5-digit ZIP code',
  epa_region: 'must be an EPA region of two digits, 01 to 10',
  naics: 'must be a NAICS code or prefix of 2 to 6 digits',
  sic: 'must be a SIC code of 4 digits',
};

/** The profile filters' query parameters (the older state, program, compliance_status and q stay where they are). */
export const FACILITY_FILTER_PARAMS = {
  city: Type.String({ minLength: 1, maxLength: 100, pattern: NO_NUL, description: 'City, matched whole and case-insensitively' }),
  county: Type.String({ minLength: 1, maxLength: 100, pattern: NO_NUL, description: 'County, matched whole and case-insensitively' }),
  zip: Type.String({ pattern: '^[0-9]{5}$', description: '5-digit ZIP code (a facility with a ZIP+4 matches its first five digits)' }),
  epa_region: Type.String({ pattern: '^(0[1-9]|10)$', description: 'EPA region, two digits: 01 to 10' }),
  bbox: Type.String({
    minLength: 1,
    maxLength: 100,
    description: '`minLon,minLat,maxLon,maxLat` in decimal degrees: facilities inside the box (edges included)',
  }),
  naics: Type.String({ pattern: '^[0-9]{2,6}$', description: 'NAICS prefix of 2 to 6 digits: one of the codes starts with it' }),
  sic: Type.String({ pattern: '^[0-9]{4}$', description: 'SIC code of 4 digits: one of the codes is it' }),
  major: Type.Boolean({ description: 'Major facility (ECHO FAC_MAJOR_FLAG)' }),
  min_quarters_nc: Type.Integer({ minimum: 0, maximum: 1000, description: 'At least this many quarters with non-compliance' }),
  snc: Type.Boolean({ description: 'In significant non-compliance (compliance.snc)' }),
  min_penalties_usd: Type.Integer({ minimum: 0, maximum: 1e15, description: 'Total penalties of at least this many whole US dollars' }),
  penalized_since: { ...Since, description: 'Last penalty on or after this date' },
  inspected_since: { ...Since, description: 'Last inspection on or after this date' },
  not_inspected_since: { ...Since, description: 'Not inspected on or after this date (never inspected included)' },
  updated_since: Type.String({
    minLength: 1,
    maxLength: 40,
    description:
      'An instant (RFC 3339, e.g. `2026-11-27T08:00:00Z`): facilities changed after it, in the order their changes committed (the list: its own cursor, kept on the last page to poll for later changes)',
  }),
};

export const SortParam = StringEnum(FACILITY_SORTS, {
  description:
    'Order: `name`, `-penalties_total`, `-quarters_nc` (largest first), `last_inspection` (oldest first) or `distance` (with `near`). Facilities without the value come last; default registry_id, or distance with `near`.',
});

type FilterParams = { [K in keyof typeof FACILITY_FILTER_PARAMS]?: Static<(typeof FACILITY_FILTER_PARAMS)[K]> } & {
  state?: string | undefined;
  program?: string | undefined;
  compliance_status?: string | undefined;
  q?: string | undefined;
};

const INSTANT = /^(\d{4}-\d{2}-\d{2})[Tt ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

/** `updated_since`: an RFC 3339 instant Postgres reads as it is; 400 VALIDATION_ERROR naming it otherwise. */
function instant(value: string): string {
  const date = INSTANT.exec(value)?.[1];
  if (date === undefined || !isCalendarDate(date) || date.startsWith('0000')) {
    throw validationError([
      { field: 'updated_since', message: 'must be an RFC 3339 instant with a time zone, e.g. 2026-11-27T08:00:00Z (years 0001 to 9999)' },
    ]);
  }
  return value;
}

const DECIMAL = /^[+-]?(\d{1,3}(\.\d{1,12})?|\.\d{1,12})$/;

/** `bbox=minLon,minLat,maxLon,maxLat`; 400 VALIDATION_ERROR naming bbox otherwise. */
function boundingBox(bbox: string): BoundingBox {
  const parts = bbox.split(',').map((p) => p.trim());
  const [minLon, minLat, maxLon, maxLat] = parts.map((p) => (DECIMAL.test(p) ? Number(p) : Number.NaN));
  const lon = (v: number | undefined): v is number => v !== undefined && v >= -180 && v <= 180;
  const lat = (v: number | undefined): v is number => v !== undefined && v >= -90 && v <= 90;
  if (parts.length !== 4 || !lon(minLon) || !lat(minLat) || !lon(maxLon) || !lat(maxLat) || minLon > maxLon || minLat > maxLat) {
    throw validationError([
      {
        field: 'bbox',
        message: 'must be minLon,minLat,maxLon,maxLat in decimal degrees, longitudes -180 to 180, latitudes -90 to 90, min ≤ max',
      },
    ]);
  }
  return { min_lon: minLon, min_lat: minLat, max_lon: maxLon, max_lat: maxLat };
}

/** The filters given, as the store takes them. */
export function facilityFilter(q: FilterParams): FacilityFilter {
  const f: FacilityFilter = {};
  if (q.state) f.state = q.state;
  if (q.program) f.program = q.program as Program;
  if (q.compliance_status) f.compliance_status = q.compliance_status as ComplianceStatus;
  if (q.q) f.q = q.q;
  if (q.city !== undefined) f.city = q.city;
  if (q.county !== undefined) f.county = q.county;
  if (q.zip !== undefined) f.zip = q.zip;
  if (q.epa_region !== undefined) f.epa_region = q.epa_region;
  if (q.bbox !== undefined) f.bbox = boundingBox(q.bbox);
  if (q.naics !== undefined) f.naics = q.naics;
  if (q.sic !== undefined) f.sic = q.sic;
  if (q.major !== undefined) f.major = q.major;
  if (q.min_quarters_nc !== undefined) f.min_quarters_nc = q.min_quarters_nc;
  if (q.snc !== undefined) f.snc = q.snc;
  if (q.min_penalties_usd !== undefined) f.min_penalties_usd = q.min_penalties_usd;
  if (q.penalized_since !== undefined) f.penalized_since = q.penalized_since;
  if (q.inspected_since !== undefined) f.inspected_since = q.inspected_since;
  if (q.not_inspected_since !== undefined) f.not_inspected_since = q.not_inspected_since;
  if (q.updated_since !== undefined) f.updated_since = instant(q.updated_since);
  return f;
}
