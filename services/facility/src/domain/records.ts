import { CASE_STATUSES, CASE_TYPES, COMPLIANCE_STATUSES, PROGRAMS, SEVERITIES } from './codes';
import {
  codeList,
  count,
  date,
  enumList,
  type Fields,
  flag,
  group,
  importColumns,
  key,
  money,
  oneOf,
  optionalDate,
  optionalNumber,
  optionalText,
  optionalUsd,
  type ParseResult,
  parseFields,
  registryIds,
  stateCode,
  text,
  type ValuesOf,
} from './fields';

export type { ParseResult } from './fields';
export { isCalendarDate } from './row-reader';

/**
 * Import records: one row of an import file or of the ingestion API, keyed by
 * its natural key (registry_id, source_id, case_number). A row is the full
 * state of the record at the source: optional fields left out become null.
 *
 * Each resource's fields are declared here, once, in the order of its import header and of its
 * representation: adding a field is one line here (and its column in a migration); the record
 * type, the parser, the representation (domain/model.ts) and the SQL (store/rows.ts) follow.
 */

/** A facility: every field is also in its representation, between `id` and `updated_at`. */
export const FACILITY_FIELDS = {
  registry_id: key(40),
  name: text(200),
  street: optionalText(200),
  city: optionalText(100),
  state: stateCode(),
  zip: optionalText(10, /^\d{5}(-\d{4})?$/, 'must be a ZIP code (12345 or 12345-6789)'),
  county: optionalText(100),
  latitude: optionalNumber(-90, 90),
  longitude: optionalNumber(-180, 180),
  naics_codes: codeList(/^\d{2,6}$/, 'must be NAICS codes of 2 to 6 digits'),
  programs: enumList(PROGRAMS),
  compliance_status: oneOf(COMPLIANCE_STATUSES),
  last_inspection_date: optionalDate(),
  // The compliance profile (docs/facility.md): ECHO Exporter's FAC_* summary columns.
  epa_region: optionalText(2, /^(0[1-9]|10)$/, 'must be an EPA region 01 to 10'),
  sic_codes: codeList(/^\d{4}$/, 'must be SIC codes of 4 digits'),
  major: flag(),
  program_status: group({ caa: optionalText(100), cwa: optionalText(100), rcra: optionalText(100) }),
  compliance: group({ quarters_with_noncompliance: count(), programs_with_snc: count(), snc: flag() }),
  inspections: group({ count: count(), last_date: optionalDate() }),
  enforcement: group({ informal_actions: count(), formal_actions: count(), last_formal_action_date: optionalDate() }),
  penalties: group({ count: count(), total_usd: optionalUsd(), last_amount_usd: optionalUsd(), last_date: optionalDate() }),
} satisfies Fields;

/** A violation's fields in both its import row and its representation. */
export const VIOLATION_FIELDS = {
  program: oneOf(PROGRAMS),
  violation_type: text(200),
  violation_date: date(),
  severity: oneOf(SEVERITIES),
  description: optionalText(2000),
  resolved_date: optionalDate('violation_date'),
} satisfies Fields;

/** A case's fields in both its import row and its representation. */
export const CASE_FIELDS = {
  case_number: key(60),
  case_type: oneOf(CASE_TYPES),
  status: oneOf(CASE_STATUSES),
  lead_agency: text(100),
  filed_date: date(),
  settled_date: optionalDate('filed_date'),
  penalty_amount_usd: money(),
} satisfies Fields;

/** The fields of each kind's import row, in the order of its header. */
const IMPORT_FIELDS = {
  facilities: FACILITY_FIELDS,
  violations: {
    source_id: key(100),
    /** The facility's registry_id (the representation has its id and name instead). */
    registry_id: key(40),
    ...VIOLATION_FIELDS,
  },
  cases: {
    ...CASE_FIELDS,
    /** registry_ids of the facilities involved (the representation has their ids instead). */
    registry_ids: registryIds(),
  },
} satisfies Record<string, Fields>;

export type RecordKind = keyof typeof IMPORT_FIELDS;
export const RECORD_KINDS: readonly RecordKind[] = ['facilities', 'violations', 'cases'];

export type FacilityRecord = ValuesOf<typeof IMPORT_FIELDS.facilities>;
export type ViolationRecord = ValuesOf<typeof IMPORT_FIELDS.violations>;
export type CaseRecord = ValuesOf<typeof IMPORT_FIELDS.cases>;

export interface RecordOf {
  facilities: FacilityRecord;
  violations: ViolationRecord;
  cases: CaseRecord;
}

/** The import header of each kind (a group's sub-fields as `group.sub`). */
export const FIELDS: Record<RecordKind, readonly string[]> = {
  facilities: importColumns(IMPORT_FIELDS.facilities),
  violations: importColumns(IMPORT_FIELDS.violations),
  cases: importColumns(IMPORT_FIELDS.cases),
};

export const NATURAL_KEY: { [K in RecordKind]: keyof RecordOf[K] & string } = {
  facilities: 'registry_id',
  violations: 'source_id',
  cases: 'case_number',
};

export const parseFacility = (raw: Record<string, unknown>): ParseResult<FacilityRecord> => parseFields(IMPORT_FIELDS.facilities, raw);
export const parseViolation = (raw: Record<string, unknown>): ParseResult<ViolationRecord> => parseFields(IMPORT_FIELDS.violations, raw);
export const parseCase = (raw: Record<string, unknown>): ParseResult<CaseRecord> => parseFields(IMPORT_FIELDS.cases, raw);

export const PARSERS: { [K in RecordKind]: (raw: Record<string, unknown>) => ParseResult<RecordOf[K]> } = {
  facilities: parseFacility,
  violations: parseViolation,
  cases: parseCase,
};
