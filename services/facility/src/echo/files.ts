import { normalizeState } from '../domain/codes';
import {
  AIR_SEVERITY,
  CASE_TYPE,
  caseStatus,
  cell,
  complianceStatus,
  echoDate,
  echoNumber,
  idList,
  NPDES_RESOLVED_CODES,
  PROGRAM_FLAGS,
  RowReason,
} from './codes';
import type { EchoFileName } from './layouts';
import { PROFILE_READS, PROFILE_STAGE, profileCells } from './profile';

/**
 * What the adapter reads from each ECHO file: the columns (a file lacking one is refused), the
 * unit it belongs to (a unit is applied in one transaction), and the mapping of one row to the
 * rows of the staging tables. docs/echo.md lists every column → field.
 */

export type StageName = 'facilities' | 'links' | 'violations' | 'case_enf' | 'case_fac' | 'case_concl' | 'case_pen';

/** Staging tables: temp tables filled with COPY, columns after `line` in this order. */
export const STAGES: Record<StageName, string> = {
  facilities: `registry_id text, name text, street text, city text, state text, zip text, county text, latitude float8, longitude float8, naics_codes text, programs text, compliance_status text, last_inspection_date date, ${PROFILE_STAGE}, links text`,
  links: 'system text, pgm_sys_id text, registry_id text',
  violations:
    'source_id text, system text, pgm_sys_id text, program text, violation_type text, violation_date date, severity text, description text, resolved_date date',
  case_enf: 'case_number text, case_type text, status text, lead_agency text, filed_date date, penalty numeric',
  case_fac: 'case_number text, registry_id text',
  case_concl: 'case_number text, settled_date date',
  case_pen: 'case_number text, penalty numeric',
};

export type UnitName = 'links' | 'facilities' | 'icis-air' | 'rcra' | 'npdes' | 'cases';
/** Units in the order they are applied: links and facilities before what refers to them. */
export const UNITS: UnitName[] = ['links', 'facilities', 'icis-air', 'rcra', 'npdes', 'cases'];

export type Cell = string | null;
type Get = (column: string) => string | undefined;

export interface FileSpec {
  file: EchoFileName;
  unit: UnitName;
  /** The staging table its rows are copied into. */
  stage: StageName;
  /** The columns read (all must be in the header). */
  reads: string[];
  /** The staging row (columns after `line`), or null for a row with nothing to load; throws RowReason. */
  map(get: Get): Cell[] | null;
}

const v = (s: string | undefined): Cell => s ?? null;

function required(get: Get, column: string): string {
  const s = cell(get(column));
  if (s === undefined) throw new RowReason(`${column}: empty`);
  return s;
}

function state(get: Get, column: string): string {
  const s = required(get, column);
  const n = normalizeState(s);
  if (!n) throw new RowReason(`${column}: unknown state code '${s}'`);
  return n;
}

/** Text without NUL bytes (Postgres text cannot hold them); blank padding trimmed. */
function text(get: Get, column: string): Cell {
  const s = cell(get(column));
  return s === undefined ? null : s.replaceAll('\u0000', '');
}

const EXPORTER_LINKS: ReadonlyArray<readonly [string, string]> = [
  ['AIR_IDS', 'AIR'],
  ['NPDES_IDS', 'NPDES'],
  ['RCRA_IDS', 'RCRAINFO'],
  ['SDWA_IDS', 'SDWIS'],
];

const exporter: FileSpec = {
  file: 'ECHO_EXPORTER.csv',
  stage: 'facilities',
  unit: 'facilities',
  reads: [
    'REGISTRY_ID',
    'FAC_NAME',
    'FAC_STREET',
    'FAC_CITY',
    'FAC_STATE',
    'FAC_ZIP',
    'FAC_COUNTY',
    'FAC_LAT',
    'FAC_LONG',
    'FAC_DATE_LAST_INSPECTION',
    'FAC_COMPLIANCE_STATUS',
    'AIR_FLAG',
    'NPDES_FLAG',
    'SDWIS_FLAG',
    'RCRA_FLAG',
    'AIR_IDS',
    'NPDES_IDS',
    'RCRA_IDS',
    'SDWA_IDS',
    'FAC_NAICS_CODES',
    ...PROFILE_READS.filter((c) => c !== 'FAC_DATE_LAST_INSPECTION'),
  ],
  map(get) {
    const registry = required(get, 'REGISTRY_ID');
    const row: Cell[] = [
      registry,
      required(get, 'FAC_NAME'),
      text(get, 'FAC_STREET'),
      text(get, 'FAC_CITY'),
      state(get, 'FAC_STATE'),
      text(get, 'FAC_ZIP'),
      text(get, 'FAC_COUNTY'),
      v(echoNumber(get('FAC_LAT'), 'FAC_LAT', { min: -90, max: 90 })),
      v(echoNumber(get('FAC_LONG'), 'FAC_LONG', { min: -180, max: 180 })),
      idList(get('FAC_NAICS_CODES')).sort().join(' '),
      PROGRAM_FLAGS.filter(([col]) => cell(get(col)) === 'Y')
        .map(([, p]) => p)
        .join(' '),
      complianceStatus(get('FAC_COMPLIANCE_STATUS')),
      v(echoDate(get('FAC_DATE_LAST_INSPECTION'), 'FAC_DATE_LAST_INSPECTION')),
      ...profileCells(get),
    ];
    const links: string[] = [];
    for (const [col, system] of EXPORTER_LINKS) for (const id of idList(get(col))) links.push(`${system}|${id}`);
    row.push(links.join(' '));
    return row;
  },
};

const frsFacilities: FileSpec = {
  file: 'FRS_FACILITIES.csv',
  stage: 'facilities',
  unit: 'facilities',
  reads: [
    'FAC_NAME',
    'FAC_STREET',
    'FAC_CITY',
    'FAC_STATE',
    'FAC_ZIP',
    'REGISTRY_ID',
    'FAC_COUNTY',
    'LATITUDE_MEASURE',
    'LONGITUDE_MEASURE',
  ],
  map(get) {
    return [
      required(get, 'REGISTRY_ID'),
      required(get, 'FAC_NAME'),
      text(get, 'FAC_STREET'),
      text(get, 'FAC_CITY'),
      state(get, 'FAC_STATE'),
      text(get, 'FAC_ZIP'),
      text(get, 'FAC_COUNTY'),
      v(echoNumber(get('LATITUDE_MEASURE'), 'LATITUDE_MEASURE', { min: -90, max: 90 })),
      v(echoNumber(get('LONGITUDE_MEASURE'), 'LONGITUDE_MEASURE', { min: -180, max: 180 })),
      // FRS carries no NAICS, programs or compliance status: programs come from the
      // program links; a stored status and profile are kept (a new facility starts at
      // no_violation and the profile's defaults).
      null,
      null,
      null,
      null,
      ...PROFILE_STAGE.split(',').map(() => null),
      null,
    ];
  },
};

const frsLinks: FileSpec = {
  file: 'FRS_PROGRAM_LINKS.csv',
  stage: 'links',
  unit: 'links',
  reads: ['PGM_SYS_ACRNM', 'PGM_SYS_ID', 'REGISTRY_ID'],
  map(get) {
    return [required(get, 'PGM_SYS_ACRNM').toUpperCase(), required(get, 'PGM_SYS_ID'), required(get, 'REGISTRY_ID')];
  },
};

const airFacilities: FileSpec = {
  file: 'ICIS-AIR_FACILITIES.csv',
  stage: 'links',
  unit: 'links',
  reads: ['PGM_SYS_ID', 'REGISTRY_ID'],
  map(get) {
    const registry = cell(get('REGISTRY_ID'));
    // An air source not (yet) in FRS has no registry id: nothing to link.
    return registry === undefined ? null : ['AIR', required(get, 'PGM_SYS_ID'), registry];
  },
};

const airViolations: FileSpec = {
  file: 'ICIS-AIR_VIOLATION_HISTORY.csv',
  stage: 'violations',
  unit: 'icis-air',
  reads: [
    'PGM_SYS_ID',
    'ACTIVITY_ID',
    'ENF_RESPONSE_POLICY_CODE',
    'PROGRAM_DESCS',
    'POLLUTANT_DESCS',
    'EARLIEST_FRV_DETERM_DATE',
    'HPV_DAYZERO_DATE',
    'HPV_RESOLVED_DATE',
  ],
  map(get) {
    const policy = required(get, 'ENF_RESPONSE_POLICY_CODE');
    const severity = AIR_SEVERITY[policy];
    if (!severity) throw new RowReason(`ENF_RESPONSE_POLICY_CODE: unknown value '${policy}'`);
    const date =
      echoDate(get('EARLIEST_FRV_DETERM_DATE'), 'EARLIEST_FRV_DETERM_DATE') ?? echoDate(get('HPV_DAYZERO_DATE'), 'HPV_DAYZERO_DATE');
    if (!date) throw new RowReason('EARLIEST_FRV_DETERM_DATE and HPV_DAYZERO_DATE: both empty');
    const programs = text(get, 'PROGRAM_DESCS');
    const pollutants = text(get, 'POLLUTANT_DESCS');
    const description = [programs, pollutants && `Pollutants: ${pollutants}`].filter(Boolean).join('. ');
    const pgm = required(get, 'PGM_SYS_ID');
    return [
      `ICIS-AIR:${required(get, 'ACTIVITY_ID')}`,
      'AIR',
      pgm,
      'CAA',
      policy,
      date,
      severity,
      description === '' ? null : description,
      v(echoDate(get('HPV_RESOLVED_DATE'), 'HPV_RESOLVED_DATE')),
    ];
  },
};

const rcraViolations: FileSpec = {
  file: 'RCRA_VIOLATIONS.csv',
  stage: 'violations',
  unit: 'rcra',
  reads: [
    'ID_NUMBER',
    'ACTIVITY_LOCATION',
    'VIOLATION_TYPE',
    'VIOLATION_TYPE_DESC',
    'VIOL_DETERMINED_BY_AGENCY',
    'DATE_VIOLATION_DETERMINED',
    'ACTUAL_RTC_DATE',
  ],
  map(get) {
    const id = required(get, 'ID_NUMBER');
    const location = state(get, 'ACTIVITY_LOCATION');
    const type = required(get, 'VIOLATION_TYPE');
    const agency = cell(get('VIOL_DETERMINED_BY_AGENCY')) ?? '';
    const date = echoDate(get('DATE_VIOLATION_DETERMINED'), 'DATE_VIOLATION_DETERMINED');
    if (!date) throw new RowReason('DATE_VIOLATION_DETERMINED: empty');
    // RCRA_VIOLATIONS has no violation id: the composite below is its identity (docs/echo.md).
    return [
      `RCRA:${id}:${location}:${type}:${agency}:${date}`,
      'RCRAINFO',
      id,
      'RCRA',
      type,
      date,
      'moderate',
      text(get, 'VIOLATION_TYPE_DESC'),
      v(echoDate(get('ACTUAL_RTC_DATE'), 'ACTUAL_RTC_DATE')),
    ];
  },
};

const npdesViolations: FileSpec = {
  file: 'NPDES_SE_VIOLATIONS.csv',
  stage: 'violations',
  unit: 'npdes',
  reads: [
    'NPDES_ID',
    'NPDES_VIOLATION_ID',
    'VIOLATION_CODE',
    'VIOLATION_DESC',
    'SINGLE_EVENT_VIOLATION_DATE',
    'SINGLE_EVENT_END_DATE',
    'RNC_DETECTION_CODE',
    'RNC_RESOLUTION_CODE',
    'RNC_RESOLUTION_DATE',
  ],
  map(get) {
    const date = echoDate(get('SINGLE_EVENT_VIOLATION_DATE'), 'SINGLE_EVENT_VIOLATION_DATE');
    if (!date) throw new RowReason('SINGLE_EVENT_VIOLATION_DATE: empty');
    const end = echoDate(get('SINGLE_EVENT_END_DATE'), 'SINGLE_EVENT_END_DATE');
    const resolution = cell(get('RNC_RESOLUTION_CODE'));
    const resolvedByRnc =
      resolution !== undefined && NPDES_RESOLVED_CODES.has(resolution)
        ? echoDate(get('RNC_RESOLUTION_DATE'), 'RNC_RESOLUTION_DATE')
        : undefined;
    return [
      `NPDES:${required(get, 'NPDES_VIOLATION_ID')}`,
      'NPDES',
      required(get, 'NPDES_ID'),
      'CWA',
      required(get, 'VIOLATION_CODE'),
      date,
      cell(get('RNC_DETECTION_CODE')) === undefined ? 'moderate' : 'significant',
      text(get, 'VIOLATION_DESC'),
      v(end ?? resolvedByRnc),
    ];
  },
};

const caseEnforcements: FileSpec = {
  file: 'CASE_ENFORCEMENTS.csv',
  stage: 'case_enf',
  unit: 'cases',
  reads: ['CASE_NUMBER', 'FISCAL_YEAR', 'ACTIVITY_TYPE_CODE', 'ACTIVITY_STATUS_CODE', 'LEAD', 'TOTAL_PENALTY_ASSESSED_AMT'],
  map(get) {
    const typeCode = required(get, 'ACTIVITY_TYPE_CODE');
    const caseType = CASE_TYPE[typeCode];
    if (!caseType) throw new RowReason(`ACTIVITY_TYPE_CODE: unknown value '${typeCode}'`);
    const fy = required(get, 'FISCAL_YEAR');
    if (!/^\d{4}$/.test(fy)) throw new RowReason(`FISCAL_YEAR: not a year: '${fy}'`);
    return [
      required(get, 'CASE_NUMBER'),
      caseType,
      caseStatus(get('ACTIVITY_STATUS_CODE')),
      cell(get('LEAD')) ?? 'EPA',
      // The download has no filing date; the federal fiscal year the case belongs to starts on 1 October.
      `${Number(fy) - 1}-10-01`,
      v(echoNumber(get('TOTAL_PENALTY_ASSESSED_AMT'), 'TOTAL_PENALTY_ASSESSED_AMT', { min: 0 })),
    ];
  },
};

const caseFacilities: FileSpec = {
  file: 'CASE_FACILITIES.csv',
  stage: 'case_fac',
  unit: 'cases',
  reads: ['CASE_NUMBER', 'REGISTRY_ID'],
  map(get) {
    return [required(get, 'CASE_NUMBER'), required(get, 'REGISTRY_ID')];
  },
};

const caseConclusions: FileSpec = {
  file: 'CASE_ENFORCEMENT_CONCLUSIONS.csv',
  stage: 'case_concl',
  unit: 'cases',
  reads: ['CASE_NUMBER', 'SETTLEMENT_ENTERED_DATE'],
  map(get) {
    return [required(get, 'CASE_NUMBER'), v(echoDate(get('SETTLEMENT_ENTERED_DATE'), 'SETTLEMENT_ENTERED_DATE'))];
  },
};

const casePenalties: FileSpec = {
  file: 'CASE_PENALTIES.csv',
  stage: 'case_pen',
  unit: 'cases',
  reads: ['CASE_NUMBER', 'FED_PENALTY'],
  map(get) {
    return [required(get, 'CASE_NUMBER'), v(echoNumber(get('FED_PENALTY'), 'FED_PENALTY', { min: 0 }))];
  },
};

export const FILE_SPECS: FileSpec[] = [
  frsLinks,
  airFacilities,
  exporter,
  frsFacilities,
  airViolations,
  rcraViolations,
  npdesViolations,
  caseEnforcements,
  caseFacilities,
  caseConclusions,
  casePenalties,
];
