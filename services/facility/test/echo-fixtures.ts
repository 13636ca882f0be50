import { createWriteStream, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yazl from 'yazl';
import { type EchoFileName, PUBLISHED_HEADERS } from '../src/echo/layouts';

/**
 * ECHO downloads for the sync tests, written as EPA publishes them: one zip per source system,
 * CSV files with the published header (every column, in order), CRLF line ends, `"` quoting
 * only where a cell holds a comma, quote or line break, blank cells as empty fields, ids as
 * text with their leading zeros, MM/DD/YYYY dates (MM-DD-YYYY in the ICIS-Air violation
 * history), Oracle blank padding kept, and some rows that must be rejected.
 */

type Row = Record<string, string>;
export type Download = Partial<Record<EchoFileName, Row[]>>;

function csvCell(v: string): string {
  return /[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v;
}

export function csvText(file: EchoFileName, rows: Row[], header: readonly string[] = PUBLISHED_HEADERS[file]): string {
  for (const r of rows) for (const k of Object.keys(r)) if (!header.includes(k)) throw new Error(`${file} has no column ${k}`);
  const lines = [header.join(','), ...rows.map((r) => header.map((h) => csvCell(r[h] ?? '')).join(','))];
  return `${lines.join('\r\n')}\r\n`;
}

export const ZIPS: Record<string, EchoFileName[]> = {
  'echo_exporter.zip': ['ECHO_EXPORTER.csv'],
  'ICIS-AIR_downloads.zip': ['ICIS-AIR_FACILITIES.csv', 'ICIS-AIR_VIOLATION_HISTORY.csv'],
  'rcra_downloads.zip': ['RCRA_FACILITIES.csv', 'RCRA_VIOLATIONS.csv'],
  'npdes_downloads.zip': ['NPDES_SE_VIOLATIONS.csv'],
  'case_downloads.zip': ['CASE_ENFORCEMENTS.csv', 'CASE_FACILITIES.csv', 'CASE_ENFORCEMENT_CONCLUSIONS.csv', 'CASE_PENALTIES.csv'],
};

function writeZip(path: string, files: Array<[string, string | Buffer]>): Promise<void> {
  const zip = new yazl.ZipFile();
  for (const [name, body] of files)
    zip.addBuffer(Buffer.isBuffer(body) ? body : Buffer.from(body), name, { mtime: new Date(Date.UTC(2026, 10, 1)) });
  zip.end();
  return new Promise((resolve, reject) => {
    const out = createWriteStream(path);
    zip.outputStream.pipe(out).once('close', resolve).once('error', reject);
  });
}

/** Writes a download as the folder of zips EPA publishes; `overrides` replaces a file's text. */
export async function writeDownload(d: Download, overrides: Partial<Record<EchoFileName, string>> = {}, dir?: string): Promise<string> {
  const out = dir ?? mkdtempSync(join(tmpdir(), 'echo-download-'));
  mkdirSync(out, { recursive: true });
  for (const [zipName, files] of Object.entries(ZIPS)) {
    const present = files.filter((f) => d[f] !== undefined || overrides[f] !== undefined);
    if (present.length === 0) continue;
    await writeZip(
      join(out, zipName),
      present.map((f) => [f, overrides[f] ?? csvText(f, d[f] ?? [])]),
    );
  }
  return out;
}

/** All files of a download in one zip (what the http(s) test serves). */
export async function writeSingleZip(d: Download, path: string): Promise<void> {
  await writeZip(
    path,
    (Object.keys(d) as EchoFileName[]).map((f) => [f, csvText(f, d[f] ?? [])]),
  );
}

export function writeCsvFolder(d: Download): string {
  const out = mkdtempSync(join(tmpdir(), 'echo-csv-'));
  for (const f of Object.keys(d) as EchoFileName[]) writeFileSync(join(out, f), csvText(f, d[f] ?? []));
  return out;
}

// Registry ids, program ids and case numbers used below.
export const F = {
  plating: '110000012345',
  alafab: '110000067890',
  riverside: '110012345678',
  acme: '110070000001',
} as const;

function exporter(r: Row): Row {
  return {
    FAC_INDIAN_CNTRY_FLG: 'N',
    FAC_FEDERAL_FLG: 'N',
    FAC_US_MEX_BORDER_FLG: 'N',
    FAC_CHESAPEAKE_BAY_FLG: 'N',
    FAC_MAJOR_FLAG: 'N',
    FAC_ACTIVE_FLAG: 'Y',
    FAC_SNC_FLG: 'N',
    AIR_FLAG: 'N',
    NPDES_FLAG: 'N',
    SDWIS_FLAG: 'N',
    RCRA_FLAG: 'N',
    TRI_FLAG: 'N',
    GHG_FLAG: 'N',
    ...r,
    DFR_URL: `https://echo.epa.gov/detailed-facility-report?fid=${r.REGISTRY_ID}`,
  };
}

const facilities1: Row[] = [
  exporter({
    REGISTRY_ID: F.plating,
    FAC_NAME: 'Sample "Bright Finish" Plating, Inc.',
    FAC_STREET: '12 Mill St',
    FAC_CITY: 'BRISTOL',
    FAC_STATE: 'CT',
    FAC_ZIP: '06010',
    FAC_COUNTY: 'HARTFORD',
    FAC_FIPS_CODE: '09003',
    FAC_EPA_REGION: '01',
    FAC_LAT: '41.673',
    FAC_LONG: '-72.946',
    FAC_DATE_LAST_INSPECTION: '04/12/2023',
    FAC_COMPLIANCE_STATUS: 'No Violation Identified',
    AIR_FLAG: 'Y',
    AIR_IDS: 'CT0000000900300123',
    CAA_COMPLIANCE_STATUS: 'No Violation Identified',
    FAC_NAICS_CODES: '332813',
    FAC_SIC_CODES: '3471',
  }),
  exporter({
    REGISTRY_ID: F.alafab,
    FAC_NAME: 'ALAFAB, INC',
    FAC_STREET: '2100 1ST AVE N',
    FAC_CITY: 'BIRMINGHAM',
    FAC_STATE: 'AL',
    FAC_ZIP: '35203-4201',
    FAC_COUNTY: 'JEFFERSON',
    FAC_FIPS_CODE: '01073',
    FAC_EPA_REGION: '4',
    FAC_LAT: '33.518',
    FAC_LONG: '-86.81',
    FAC_COMPLIANCE_STATUS: 'Violation Identified',
    RCRA_FLAG: 'Y',
    RCRA_IDS: 'ALD004001715',
    RCRA_COMPLIANCE_STATUS: 'Violation Identified',
    FAC_NAICS_CODES: '332312 332710',
    // A partial profile (and a one-digit region): cents in amounts, some counts and dates left empty.
    FAC_QTRS_WITH_NC: '3',
    FAC_INSPECTION_COUNT: '2',
    FAC_INFORMAL_COUNT: '1',
    FAC_PENALTY_COUNT: '2',
    FAC_TOTAL_PENALTIES: '12500.50',
    FAC_LAST_PENALTY_AMT: '2500.25',
    FAC_DATE_LAST_PENALTY: '03/01/2022',
  }),
  exporter({
    REGISTRY_ID: F.riverside,
    FAC_NAME: 'RIVERSIDE WATER RECLAMATION PLANT',
    FAC_STREET: '900 RIVER RD',
    FAC_CITY: 'AUSTIN',
    FAC_STATE: 'TX',
    FAC_ZIP: '78701',
    FAC_COUNTY: 'Travis',
    FAC_FIPS_CODE: '48453',
    FAC_EPA_REGION: '06',
    FAC_LAT: '30.26',
    FAC_LONG: '-97.74',
    FAC_DATE_LAST_INSPECTION: '09/30/2024',
    FAC_COMPLIANCE_STATUS: 'Significant Violation',
    NPDES_FLAG: 'Y',
    NPDES_IDS: 'TX0012345',
    CWA_COMPLIANCE_STATUS: 'Significant Violation',
    CWA_SNC_FLAG: 'Y',
    FAC_NAICS_CODES: '221320',
    // A full compliance profile (every FAC_* summary cell written).
    FAC_SIC_CODES: '4952 4941',
    FAC_MAJOR_FLAG: 'Y',
    FAC_QTRS_WITH_NC: '7',
    FAC_PROGRAMS_WITH_SNC: '1',
    FAC_SNC_FLG: 'Y',
    FAC_INSPECTION_COUNT: '6',
    FAC_INFORMAL_COUNT: '2',
    FAC_FORMAL_ACTION_COUNT: '1',
    FAC_DATE_LAST_FORMAL_ACTION: '11/15/2024',
    FAC_PENALTY_COUNT: '1',
    FAC_TOTAL_PENALTIES: '187500',
    FAC_LAST_PENALTY_AMT: '187500',
    FAC_DATE_LAST_PENALTY: '08/19/2025',
  }),
  exporter({
    REGISTRY_ID: F.acme,
    FAC_NAME: 'ACME METALS, DIVISION OF\r\nACME CORP',
    FAC_STREET: '1 FOUNDRY WAY',
    FAC_CITY: 'CLEVELAND',
    FAC_STATE: 'oh',
    FAC_ZIP: '44114',
    FAC_COUNTY: '',
    FAC_EPA_REGION: '',
    // Every profile cell empty (flags too).
    FAC_MAJOR_FLAG: '',
    FAC_SNC_FLG: '',
    FAC_COMPLIANCE_STATUS: 'No Violation Identified',
    AIR_FLAG: 'Y',
    RCRA_FLAG: 'Y',
    AIR_IDS: 'OH0000001234567',
    RCRA_IDS: 'OHD000123456',
  }),
  // Rejected: unknown state code; a date that is not one.
  exporter({ REGISTRY_ID: '110099000001', FAC_NAME: 'NOWHERE WORKS', FAC_STATE: 'XX', FAC_COMPLIANCE_STATUS: 'No Violation Identified' }),
  exporter({
    REGISTRY_ID: '110099000002',
    FAC_NAME: 'BAD DATE LLC',
    FAC_STATE: 'NV',
    FAC_DATE_LAST_INSPECTION: '13/45/2020',
    FAC_COMPLIANCE_STATUS: 'No Violation Identified',
  }),
];

const airFacilities: Row[] = [
  {
    PGM_SYS_ID: 'CT0000000900300123',
    REGISTRY_ID: F.plating,
    FACILITY_NAME: 'SAMPLE BRIGHT FINISH PLATING',
    STREET_ADDRESS: '12 MILL ST',
    CITY: 'BRISTOL',
    COUNTY_NAME: 'HARTFORD',
    STATE: 'CT',
    ZIP_CODE: '06010',
    EPA_REGION: '01',
    SIC_CODES: '3471',
    NAICS_CODES: '332813',
    FACILITY_TYPE_CODE: 'POF',
    AIR_POLLUTANT_CLASS_CODE: 'SMI',
    AIR_POLLUTANT_CLASS_DESC: 'Synthetic Minor Emissions',
    AIR_OPERATING_STATUS_CODE: 'OPR',
    AIR_OPERATING_STATUS_DESC: 'Operating',
  },
  {
    PGM_SYS_ID: 'OH0000001234567',
    REGISTRY_ID: F.acme,
    FACILITY_NAME: 'ACME METALS',
    STATE: 'OH',
    EPA_REGION: '05',
    AIR_POLLUTANT_CLASS_CODE: 'MAJ',
    AIR_POLLUTANT_CLASS_DESC: 'Major Emissions',
    AIR_OPERATING_STATUS_CODE: 'OPR',
    AIR_OPERATING_STATUS_DESC: 'Operating',
  },
];

const airViolations1: Row[] = [
  {
    PGM_SYS_ID: 'CT0000000900300123',
    ACTIVITY_ID: '3600123456',
    AGENCY_TYPE_DESC: 'State',
    STATE_CODE: 'CT',
    COMP_DETERMINATION_UID: 'CT000A0000090030012300001',
    ENF_RESPONSE_POLICY_CODE: 'FRV',
    PROGRAM_CODES: 'CAASIP, CAATVP',
    PROGRAM_DESCS: 'State Implementation Plan for National Primary and Secondary Ambient Air Quality Standards, Title V Permits',
    POLLUTANT_CODES: '300000329',
    POLLUTANT_DESCS: 'VOLATILE ORGANIC COMPOUNDS (VOCS)',
    EARLIEST_FRV_DETERM_DATE: '10-28-2022',
  },
  {
    PGM_SYS_ID: 'OH0000001234567',
    ACTIVITY_ID: '3600200001',
    AGENCY_TYPE_DESC: 'U.S. EPA',
    STATE_CODE: 'OH',
    COMP_DETERMINATION_UID: 'OH000A0000001234567000001',
    ENF_RESPONSE_POLICY_CODE: 'HPV',
    PROGRAM_CODES: 'CAAMACT',
    PROGRAM_DESCS: 'MACT Standards',
    EARLIEST_FRV_DETERM_DATE: '01-15-2023',
    HPV_DAYZERO_DATE: '01-20-2023',
    HPV_RESOLVED_DATE: '06-30-2023',
  },
  // Rejected: the air source links to no facility; an ISO date instead of the download's format.
  {
    PGM_SYS_ID: 'NY0000009999999',
    ACTIVITY_ID: '3600300001',
    AGENCY_TYPE_DESC: 'State',
    STATE_CODE: 'NY',
    ENF_RESPONSE_POLICY_CODE: 'FRV',
    EARLIEST_FRV_DETERM_DATE: '02-01-2023',
  },
  {
    PGM_SYS_ID: 'CT0000000900300123',
    ACTIVITY_ID: '3600400001',
    AGENCY_TYPE_DESC: 'State',
    STATE_CODE: 'CT',
    ENF_RESPONSE_POLICY_CODE: 'FRV',
    EARLIEST_FRV_DETERM_DATE: '2023-03-01',
  },
];

const rcraFacilities: Row[] = [
  {
    ID_NUMBER: 'ALD004001715',
    FACILITY_NAME: 'ALAFAB, INC',
    ACTIVITY_LOCATION: 'AL',
    FULL_ENFORCEMENT: '------',
    HREPORT_UNIVERSE_RECORD: 'LQG',
    STREET_ADDRESS: '2100 1ST AVE N',
    CITY_NAME: 'BIRMINGHAM',
    STATE_CODE: 'AL',
    ZIP_CODE: '35203',
    FED_WASTE_GENERATOR: '1',
    TRANSPORTER: 'N  ',
    ACTIVE_SITE: 'H----',
    OPERATING_TSDF: '------         ',
  },
];

const rcraViolations1: Row[] = [
  {
    ID_NUMBER: 'ALD004001715',
    ACTIVITY_LOCATION: 'AL',
    VIOLATION_TYPE: '262.A',
    VIOLATION_TYPE_DESC: 'Standards Applicable to Generators of HW: General',
    VIOL_DETERMINED_BY_AGENCY: 'S  ',
    DATE_VIOLATION_DETERMINED: '03/09/2000',
    ACTUAL_RTC_DATE: '01/10/2001',
    SCHEDULED_COMPLIANCE_DATE: '02/09/2000',
  },
  {
    ID_NUMBER: 'OHD000123456',
    ACTIVITY_LOCATION: 'OH',
    VIOLATION_TYPE: '268.A',
    VIOLATION_TYPE_DESC: 'Land Disposal Restrictions: General',
    VIOL_DETERMINED_BY_AGENCY: 'E  ',
    DATE_VIOLATION_DETERMINED: '05/17/2021',
    SCHEDULED_COMPLIANCE_DATE: '08/17/2021',
  },
  // Rejected: unknown state code.
  {
    ID_NUMBER: 'ALD004001715',
    ACTIVITY_LOCATION: 'ZZ',
    VIOLATION_TYPE: '262.C',
    VIOLATION_TYPE_DESC: 'Standards Applicable to Generators of HW: Pre-Transport Requirements',
    VIOL_DETERMINED_BY_AGENCY: 'S  ',
    DATE_VIOLATION_DETERMINED: '04/01/2019',
  },
];

const npdesViolations: Row[] = [
  {
    NPDES_ID: 'TX0012345',
    NPDES_VIOLATION_ID: '1000000001',
    VIOLATION_TYPE_CODE: 'S',
    VIOLATION_CODE: 'A0011',
    VIOLATION_DESC: 'Sanitary Sewer Overflow',
    SINGLE_EVENT_VIOLATION_DATE: '07/04/2022',
    SINGLE_EVENT_VIOLATION_COMMENT: 'Overflow at lift station 4, about 12,000 gallons.\r\nReported by phone the same day.',
    SINGLE_EVENT_AGENCY_TYPE_CODE: 'ST',
    RNC_DETECTION_CODE: 'G',
    RNC_DETECTION_DESC: 'Manual 2A1 - Effluent Violation',
    RNC_DETECTION_DATE: '07/31/2022',
  },
  {
    NPDES_ID: 'TX0012345',
    NPDES_VIOLATION_ID: '1000000002',
    VIOLATION_TYPE_CODE: 'S',
    VIOLATION_CODE: 'C0021',
    VIOLATION_DESC: 'Failure to Notify',
    SINGLE_EVENT_VIOLATION_DATE: '08/15/2022',
    SINGLE_EVENT_END_DATE: '09/01/2022',
    SINGLE_EVENT_AGENCY_TYPE_CODE: 'EPA',
  },
];

function caseRow(r: Row): Row {
  return { LEAD: 'EPA', VOLUNTARY_SELF_DISCLOSURE_FLAG: 'N', MULTIMEDIA_FLAG: 'N', ...r };
}

const cases1: Row[] = [
  caseRow({
    ACTIVITY_ID: '3601234567',
    ACTIVITY_NAME: 'RIVERSIDE WRP CWA',
    REGION_CODE: '06',
    FISCAL_YEAR: '2024',
    CASE_NUMBER: '06-2024-0311',
    CASE_NAME: 'CITY OF AUSTIN',
    ACTIVITY_TYPE_CODE: 'AFR',
    ACTIVITY_TYPE_DESC: 'Administrative - Formal',
    ACTIVITY_STATUS_CODE: 'FOI',
    ACTIVITY_STATUS_DESC: 'Final Order Issued',
    ACTIVITY_STATUS_DATE: '03/15/2024',
    CASE_STATUS_DATE: '03/15/2024',
    ENF_OUTCOME_CODE: 'ECP',
    ENF_OUTCOME_DESC: 'Final Order With Penalty',
    TOTAL_PENALTY_ASSESSED_AMT: '12500',
    HQ_DIVISION: 'WAT',
    ENF_SUMMARY_TEXT: 'Sanitary sewer overflows, unpermitted discharges.\r\nThe city agreed to a penalty, and to repair lift station 4.',
  }),
  caseRow({
    ACTIVITY_ID: '3600987654',
    ACTIVITY_NAME: 'BRIGHT FINISH / ACME CAA',
    REGION_CODE: '01',
    FISCAL_YEAR: '2023',
    CASE_NUMBER: '01-2023-0042',
    CASE_NAME: 'SAMPLE BRIGHT FINISH PLATING, INC., ET AL.',
    ACTIVITY_TYPE_CODE: 'JDC',
    ACTIVITY_TYPE_DESC: 'Judicial',
    ACTIVITY_STATUS_CODE: 'CLS',
    ACTIVITY_STATUS_DESC: 'Closed',
    ACTIVITY_STATUS_DATE: '12/01/2023',
    DOJ_DOCKET_NMBR: '90-5-2-1-12345',
    ENF_OUTCOME_CODE: 'ECR',
    ENF_OUTCOME_DESC: 'Final Order With Specified Cost Recovery',
    TOTAL_PENALTY_ASSESSED_AMT: '250000',
    HQ_DIVISION: 'AIR',
    MULTIMEDIA_FLAG: 'Y',
  }),
  // Rejected: its only facility is unknown.
  caseRow({
    ACTIVITY_ID: '3600555555',
    REGION_CODE: '05',
    FISCAL_YEAR: '2022',
    CASE_NUMBER: '05-2022-0100',
    CASE_NAME: 'UNKNOWN SITE',
    ACTIVITY_TYPE_CODE: 'AFR',
    ACTIVITY_TYPE_DESC: 'Administrative - Formal',
    ACTIVITY_STATUS_CODE: 'FOI',
    ACTIVITY_STATUS_DESC: 'Final Order Issued',
  }),
];

const caseFacilities1: Row[] = [
  {
    ACTIVITY_ID: '3601234567',
    CASE_NUMBER: '06-2024-0311',
    REGISTRY_ID: F.riverside,
    FACILITY_NAME: 'RIVERSIDE WATER RECLAMATION PLANT',
    STATE_CODE: 'TX',
    ZIP: '78701',
  },
  {
    ACTIVITY_ID: '3600987654',
    CASE_NUMBER: '01-2023-0042',
    REGISTRY_ID: F.plating,
    FACILITY_NAME: 'SAMPLE BRIGHT FINISH PLATING',
    STATE_CODE: 'CT',
    ZIP: '06010',
  },
  {
    ACTIVITY_ID: '3600987654',
    CASE_NUMBER: '01-2023-0042',
    REGISTRY_ID: F.acme,
    FACILITY_NAME: 'ACME METALS',
    STATE_CODE: 'OH',
    ZIP: '44114',
  },
  { ACTIVITY_ID: '3600555555', CASE_NUMBER: '05-2022-0100', REGISTRY_ID: '110099999999', FACILITY_NAME: 'UNKNOWN SITE', STATE_CODE: 'MI' },
];

const conclusions1: Row[] = [
  {
    ACTIVITY_ID: '3601234567',
    CASE_NUMBER: '06-2024-0311',
    ENF_CONCLUSION_ID: '4400001',
    ENF_CONCLUSION_NMBR: '1',
    ENF_CONCLUSION_ACTION_CODE: 'APO',
    ENF_CONCLUSION_NAME: 'CITY OF AUSTIN CAFO',
    SETTLEMENT_ENTERED_DATE: '03/15/2024',
    SETTLEMENT_FY: '2024',
    PRIMARY_LAW: 'CWA',
    REGION_CODE: '06',
    ACTIVITY_TYPE_CODE: 'AFR',
    FED_PENALTY_ASSESSED_AMT: '12500',
  },
  {
    ACTIVITY_ID: '3600987654',
    CASE_NUMBER: '01-2023-0042',
    ENF_CONCLUSION_ID: '4400002',
    ENF_CONCLUSION_NMBR: '1',
    ENF_CONCLUSION_ACTION_CODE: 'CDC',
    ENF_CONCLUSION_NAME: 'CONSENT DECREE',
    SETTLEMENT_LODGED_DATE: '09/05/2023',
    SETTLEMENT_ENTERED_DATE: '11/02/2023',
    SETTLEMENT_FY: '2024',
    PRIMARY_LAW: 'CAA',
    REGION_CODE: '01',
    ACTIVITY_TYPE_CODE: 'JDC',
    FED_PENALTY_ASSESSED_AMT: '250000',
  },
];

const penalties1: Row[] = [
  { ACTIVITY_ID: '3601234567', CASE_NUMBER: '06-2024-0311', FED_PENALTY: '12500', ST_LCL_PENALTY: '0' },
  { ACTIVITY_ID: '3600987654', CASE_NUMBER: '01-2023-0042', FED_PENALTY: '250000', PENALTY_COLLECTED_AMT: '250000' },
];

/** The first download. */
export function download1(): Download {
  return {
    'ECHO_EXPORTER.csv': facilities1,
    'ICIS-AIR_FACILITIES.csv': airFacilities,
    'ICIS-AIR_VIOLATION_HISTORY.csv': airViolations1,
    'RCRA_FACILITIES.csv': rcraFacilities,
    'RCRA_VIOLATIONS.csv': rcraViolations1,
    'NPDES_SE_VIOLATIONS.csv': npdesViolations,
    'CASE_ENFORCEMENTS.csv': cases1,
    'CASE_FACILITIES.csv': caseFacilities1,
    'CASE_ENFORCEMENT_CONCLUSIONS.csv': conclusions1,
    'CASE_PENALTIES.csv': penalties1,
  };
}

/**
 * The next download: 2 new violations (ICIS-Air, RCRA), 1 new case, 1 case status change
 * (06-2024-0311 Final Order Issued → Closed), 1 facility compliance-status change (the plating
 * shop: No Violation Identified → Violation Identified). The first RCRA violation is gone from
 * it (kept, counted as missing).
 */
export function download2(): Download {
  const d = download1();
  d['ECHO_EXPORTER.csv'] = facilities1.map((r) =>
    r.REGISTRY_ID === F.plating
      ? { ...r, FAC_COMPLIANCE_STATUS: 'Violation Identified', CAA_COMPLIANCE_STATUS: 'Violation Identified' }
      : r,
  );
  d['ICIS-AIR_VIOLATION_HISTORY.csv'] = [
    ...airViolations1,
    {
      PGM_SYS_ID: 'CT0000000900300123',
      ACTIVITY_ID: '3600123999',
      AGENCY_TYPE_DESC: 'State',
      STATE_CODE: 'CT',
      ENF_RESPONSE_POLICY_CODE: 'FRV',
      PROGRAM_CODES: 'CAATVP',
      PROGRAM_DESCS: 'Title V Permits',
      EARLIEST_FRV_DETERM_DATE: '09-02-2026',
    },
  ];
  d['RCRA_VIOLATIONS.csv'] = [
    ...rcraViolations1.slice(1),
    {
      ID_NUMBER: 'ALD004001715',
      ACTIVITY_LOCATION: 'AL',
      VIOLATION_TYPE: '262.D',
      VIOLATION_TYPE_DESC: 'Standards Applicable to Generators of HW: Recordkeeping and Reporting',
      VIOL_DETERMINED_BY_AGENCY: 'S  ',
      DATE_VIOLATION_DETERMINED: '10/06/2026',
    },
  ];
  d['CASE_ENFORCEMENTS.csv'] = [
    ...cases1.map((c) =>
      c.CASE_NUMBER === '06-2024-0311'
        ? { ...c, ACTIVITY_STATUS_CODE: 'CLS', ACTIVITY_STATUS_DESC: 'Closed', ACTIVITY_STATUS_DATE: '10/20/2026' }
        : c,
    ),
    caseRow({
      ACTIVITY_ID: '3609000001',
      ACTIVITY_NAME: 'ALAFAB RCRA',
      REGION_CODE: '04',
      FISCAL_YEAR: '2027',
      CASE_NUMBER: '04-2027-0007',
      CASE_NAME: 'ALAFAB, INC',
      ACTIVITY_TYPE_CODE: 'AFR',
      ACTIVITY_TYPE_DESC: 'Administrative - Formal',
      ACTIVITY_STATUS_CODE: 'ACT',
      ACTIVITY_STATUS_DESC: 'Active',
      ACTIVITY_STATUS_DATE: '10/14/2026',
      HQ_DIVISION: 'RCR',
    }),
  ];
  d['CASE_FACILITIES.csv'] = [
    ...caseFacilities1,
    {
      ACTIVITY_ID: '3609000001',
      CASE_NUMBER: '04-2027-0007',
      REGISTRY_ID: F.alafab,
      FACILITY_NAME: 'ALAFAB, INC',
      STATE_CODE: 'AL',
      ZIP: '35203',
    },
  ];
  return d;
}
