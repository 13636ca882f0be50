#!/usr/bin/env node
// Generates a synthetic EPA ECHO download for the sync-echo benchmark: the CSV files the facility
// service's `sync-echo` reads, in their published layouts (every column of
// services/facility/src/echo/layouts.ts, in order), as EPA writes them: CRLF line ends, `"`
// quoting only where a cell holds a comma, quote or line break, empty cells, ids as text with
// leading zeros, MM/DD/YYYY dates (MM-DD-YYYY in the ICIS-Air violation history), Oracle blank
// padding ('S  ').
//
//   ECHO_EXPORTER.csv               N facilities (with their AIR/NPDES/RCRA/SDWA program ids)
//   ICIS-AIR_VIOLATION_HISTORY.csv  20 % of 2N violations
//   RCRA_VIOLATIONS.csv             50 % of 2N violations
//   NPDES_SE_VIOLATIONS.csv         30 % of 2N violations
//   CASE_*.csv                      N/100 cases (1–3 facilities each, conclusions, penalties)
//
// Deterministic (seeded PRNG; a facility's state and program ids are a pure function of its
// index, so a violation names a real facility's program id without anything held in memory),
// streaming (rows written in 64 KiB chunks, waiting for 'drain'), and clean: every row loads,
// so a first sync inserts exactly N facilities, 2N violations and the cases.
//
//   node scripts/bench/echo-generate.mjs <out-dir>
//   env: BENCH_ECHO_FACILITIES (default 1,000,000), BENCH_ECHO_SEED (default 'echo-bench')
// Prints a JSON line { dir, facilities, violations, cases, files: {name: bytes}, bytes } on stdout.
import { once } from 'node:events';
import { createWriteStream, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The published headers, read from the adapter's own layout list (the service is bundled; layouts.ts is data). */
function publishedHeaders() {
  const text = readFileSync(resolve(root, 'services/facility/src/echo/layouts.ts'), 'utf8');
  const headers = {};
  for (const m of text.matchAll(/'([A-Z_-]+\.csv)': \[([^\]]*)\]/g)) headers[m[1]] = [...m[2].matchAll(/'([^']+)'/g)].map((c) => c[1]);
  if (Object.keys(headers).length < 11) throw new Error('could not read the layouts from services/facility/src/echo/layouts.ts');
  return headers;
}
const PUBLISHED_HEADERS = publishedHeaders();

/** A 32-bit integer hash (a pure function of its inputs: the facility attributes violations need). */
function h32(a, b = 0) {
  let x = (Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x27d4eb2f, 0xc2b2ae35)) >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
}

/** mulberry32: a small seeded PRNG, one per file so each file is reproducible on its own. */
function prng(seed) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    chance: (p) => next() < p,
  };
}

function seedOf(text) {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

const pad = (n, w) => String(n).padStart(w, '0');
const csv = (v) => (/[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);

// States weighted roughly as ECHO's facility counts (big states repeat), with EPA regions.
const STATE_REGION = {
  AL: '04',
  AK: '10',
  AZ: '09',
  AR: '06',
  CA: '09',
  CO: '08',
  CT: '01',
  DE: '03',
  DC: '03',
  FL: '04',
  GA: '04',
  HI: '09',
  ID: '10',
  IL: '05',
  IN: '05',
  IA: '07',
  KS: '07',
  KY: '04',
  LA: '06',
  ME: '01',
  MD: '03',
  MA: '01',
  MI: '05',
  MN: '05',
  MS: '04',
  MO: '07',
  MT: '08',
  NE: '07',
  NV: '09',
  NH: '01',
  NJ: '02',
  NM: '06',
  NY: '02',
  NC: '04',
  ND: '08',
  OH: '05',
  OK: '06',
  OR: '10',
  PA: '03',
  RI: '01',
  SC: '04',
  SD: '08',
  TN: '04',
  TX: '06',
  UT: '08',
  VT: '01',
  VA: '03',
  WA: '10',
  WV: '03',
  WI: '05',
  WY: '08',
  PR: '02',
  GU: '09',
  VI: '02',
  AS: '09',
  MP: '09',
};
const STATES = [...Object.keys(STATE_REGION), ...'CA CA CA TX TX TX NY NY PA PA OH OH IL FL FL MI NJ GA NC'.split(' ')];
const stateOf = (i) => STATES[h32(i, 1) % STATES.length];

// Program membership by i % 20: AIR 25 %, NPDES 30 %, RCRA 50 %, SDWA 10 %, some none.
const SLOTS = { AIR: [0, 1, 2, 3, 4], NPDES: [3, 4, 5, 6, 7, 8], RCRA: [6, 7, 8, 9, 10, 11, 12, 13, 14, 15], SDWIS: [16, 17] };
const has = (system, i) => SLOTS[system].includes(i % 20);
/** How many of facilities 0..n-1 hold a program, and the index of the h-th of them. */
const holders = (system, n) => Math.floor(n / 20) * SLOTS[system].length + SLOTS[system].filter((s) => s < n % 20).length;
const holder = (system, h) => 20 * Math.floor(h / SLOTS[system].length) + SLOTS[system][h % SLOTS[system].length];

const registryId = (i) => String(110000000001 + i * 13);
const programId = {
  AIR: (i) => `${stateOf(i)}0000${pad(i, 12)}`,
  NPDES: (i) => `${stateOf(i)}${pad(i, 7)}`,
  RCRA: (i) => `${stateOf(i)}D${pad(i, 9)}`,
  SDWIS: (i) => `${stateOf(i)}${pad(i + 1000000, 7)}`,
};

const DAY = 86_400_000;
const EPOCH_1985 = Date.UTC(1985, 0, 1);
/** A date `days` after 1985-01-01, as MM/DD/YYYY (or with another separator). */
function date(days, sep = '/') {
  const d = new Date(EPOCH_1985 + days * DAY);
  return `${pad(d.getUTCMonth() + 1, 2)}${sep}${pad(d.getUTCDate(), 2)}${sep}${d.getUTCFullYear()}`;
}
const recentDate = (r) => date(9000 + r.int(5000)); // 2009 – 2022

const NAME_A = [
  'ACME',
  'RIVERSIDE',
  'NORTHERN',
  'BLUE RIDGE',
  'SUMMIT',
  'LAKEVIEW',
  'PIONEER',
  'EAGLE',
  'GREAT PLAINS',
  'COASTAL',
  'VALLEY',
  'MIDWEST',
  'PACIFIC',
  'ATLANTIC',
  'CENTRAL',
  'HILLTOP',
  'GRANITE',
  'CEDAR',
  'MAPLE',
  'UNION',
];
const NAME_B = [
  'METALS',
  'PLATING',
  'CHEMICAL',
  'WATER RECLAMATION PLANT',
  'AUTO BODY',
  'DRY CLEANERS',
  'POWER STATION',
  'REFINERY',
  'FOODS',
  'PLASTICS',
  'PAPER MILL',
  'CONCRETE',
  'FARMS',
  'ELEMENTARY SCHOOL',
  'HOSPITAL',
  'LANDFILL',
  'COMPRESSOR STATION',
  'GAS STATION',
  'PRINTING',
  'WASTEWATER TREATMENT FACILITY',
];
const NAME_C = ['', '', '', ' INC', ' LLC', ', INC.', ', LLC', ' CO', ' CORP', ' - PLANT 2', ' #1042', ' "NORTH SITE"'];
const STREETS = [
  'MAIN ST',
  'MILL RD',
  'RIVER RD',
  'INDUSTRIAL PKWY',
  '1ST AVE N',
  'HIGHWAY 61',
  'COUNTY ROAD 12',
  'OAK ST',
  'MARKET ST',
  'FOUNDRY WAY',
  'PO BOX 118',
  'STATE ROUTE 9, SUITE 200',
];
const CITIES = [
  'SPRINGFIELD',
  'FRANKLIN',
  'GREENVILLE',
  'BRISTOL',
  'CLINTON',
  'MADISON',
  'GEORGETOWN',
  'SALEM',
  'FAIRVIEW',
  'RIVERSIDE',
  'AUSTIN',
  'BIRMINGHAM',
  'CLEVELAND',
  'PORTLAND',
  'JACKSON',
];
const COUNTIES = [
  'JEFFERSON',
  'WASHINGTON',
  'FRANKLIN',
  'JACKSON',
  'LINCOLN',
  'MADISON',
  'HARTFORD',
  'TRAVIS',
  'Cuyahoga',
  'MONTGOMERY',
  '',
];
const STATUS = [
  [0.68, 'No Violation Identified'],
  [0.83, 'Violation Identified'],
  [0.88, 'Significant Violation'],
  [0.9, 'High Priority Violation'],
  [0.95, 'Inactive'],
  [0.98, 'Unknown'],
  [1, ''],
];
const NAICS = ['332813', '221320', '332312', '332710', '325211', '811121', '812320', '424710', '562212', '311612', '486210', '447110'];
const SICS = ['3471', '4952', '3441', '2821', '7532', '7216', '5171', '4953', '2011', '4922', '5541'];
const HIST = '_VS';

/** Writes rows to a file in 64 KiB chunks, waiting for the stream to drain (never holds the file). */
async function writeFile(dir, name, count, row) {
  const header = PUBLISHED_HEADERS[name];
  const index = Object.fromEntries(header.map((h, i) => [h, i]));
  const out = createWriteStream(join(dir, name));
  const closed = once(out, 'close');
  let chunk = `${header.join(',')}\r\n`;
  const blank = header.map(() => '');
  for (let k = 0; k < count; k++) {
    const cells = blank.slice();
    const set = (column, value) => {
      cells[index[column]] = value;
    };
    row(k, set);
    chunk += `${cells.join(',')}\r\n`;
    if (chunk.length >= 65536) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end(chunk);
  await closed;
  return statSync(join(dir, name)).size;
}

export async function generate(dir, { facilities: n = 1_000_000, seed = 'echo-bench' } = {}) {
  mkdirSync(dir, { recursive: true });
  const base = seedOf(seed);
  const rand = (file) => prng(base ^ seedOf(file));
  const violations = 2 * n;
  const air = Math.round(violations * 0.2);
  const npdes = Math.round(violations * 0.3);
  const rcra = violations - air - npdes;
  const cases = Math.max(10, Math.round(n / 100));
  const files = {};

  let r = rand('ECHO_EXPORTER.csv');
  files['ECHO_EXPORTER.csv'] = await writeFile(dir, 'ECHO_EXPORTER.csv', n, (i, set) => {
    const st = stateOf(i);
    const id = registryId(i);
    set('REGISTRY_ID', id);
    set('FAC_NAME', csv(`${r.pick(NAME_A)} ${r.pick(NAME_B)}${r.pick(NAME_C)}`));
    set('FAC_STREET', r.chance(0.95) ? csv(`${1 + r.int(9999)} ${r.pick(STREETS)}`) : '');
    set('FAC_CITY', r.pick(CITIES));
    set('FAC_STATE', r.chance(0.02) ? st.toLowerCase() : st);
    set('FAC_ZIP', r.chance(0.3) ? `${pad(r.int(99999), 5)}-${pad(r.int(9999), 4)}` : pad(r.int(99999), 5));
    set('FAC_COUNTY', r.pick(COUNTIES));
    set('FAC_FIPS_CODE', pad(r.int(56999), 5));
    set('FAC_EPA_REGION', STATE_REGION[st]);
    for (const f of ['FAC_INDIAN_CNTRY_FLG', 'FAC_FEDERAL_FLG', 'FAC_US_MEX_BORDER_FLG', 'FAC_CHESAPEAKE_BAY_FLG', 'FAC_NAA_FLAG'])
      set(f, r.chance(0.05) ? 'Y' : 'N');
    if (r.chance(0.96)) {
      set('FAC_LAT', (24.5 + r.next() * 24.5).toFixed(6));
      set('FAC_LONG', (-124.7 + r.next() * 57.7).toFixed(6));
      set('FAC_MAP_ICON', 'FACILITY');
      set(
        'FAC_COLLECTION_METHOD',
        r.pick(['ADDRESS MATCHING-HOUSE NUMBER', 'GPS CARRIER PHASE STATIC RELATIVE POSITION', 'INTERPOLATION-PHOTO']),
      );
      set('FAC_REFERENCE_POINT', r.pick(['CENTER OF FACILITY', 'ENTRANCE POINT OF A FACILITY OR STATION', 'PLANT ENTRANCE (GENERAL)']));
      set('FAC_ACCURACY_METERS', String(1 + r.int(300)));
      set('FAC_DERIVED_HUC', pad(r.int(99999999), 8));
      set('FAC_DERIVED_WBD', pad(r.int(999999999), 12));
      set('FAC_DERIVED_STCTY_FIPS', pad(r.int(56999), 5));
      set('FAC_DERIVED_ZIP', pad(r.int(99999), 5));
      set('FAC_DERIVED_CD113', pad(r.int(53), 2));
      set('FAC_DERIVED_CB2010', pad(r.int(999999999), 15));
      set('FAC_PERCENT_MINORITY', (r.next() * 100).toFixed(2));
      set('FAC_POP_DEN', (r.next() * 9000).toFixed(3));
    }
    set('FAC_MAJOR_FLAG', r.chance(0.04) ? 'Y' : 'N');
    set('FAC_ACTIVE_FLAG', r.chance(0.9) ? 'Y' : 'N');
    set('FAC_MYRTK_UNIVERSE', r.pick(['', 'Air', 'RCRA', 'CWA', 'Air RCRA']));
    const inspections = r.chance(0.55) ? 1 + r.int(20) : 0;
    set('FAC_INSPECTION_COUNT', String(inspections));
    if (inspections > 0) {
      set('FAC_DATE_LAST_INSPECTION', recentDate(r));
      set('FAC_DAYS_LAST_INSPECTION', String(r.int(5000)));
    }
    set('FAC_INFORMAL_COUNT', String(r.int(4)));
    set('FAC_FORMAL_ACTION_COUNT', String(r.int(2)));
    if (r.chance(0.05)) {
      set('FAC_TOTAL_PENALTIES', `$${1000 + r.int(200000)}`);
      set('FAC_PENALTY_COUNT', String(1 + r.int(3)));
      set('FAC_DATE_LAST_PENALTY', recentDate(r));
    }
    set('FAC_QTRS_WITH_NC', String(r.int(13)));
    const u = r.next();
    set('FAC_COMPLIANCE_STATUS', (STATUS.find(([p]) => u < p) ?? STATUS[0])[1]);
    set('FAC_SNC_FLG', 'N');
    let hist = '';
    for (let q = 0; q < 12; q++) hist += r.chance(0.9) ? '_' : HIST[1 + r.int(2)];
    set('FAC_3YR_COMPLIANCE_HISTORY', hist);
    for (const [flag, system, ids, statusCol] of [
      ['AIR_FLAG', 'AIR', 'AIR_IDS', 'CAA_COMPLIANCE_STATUS'],
      ['NPDES_FLAG', 'NPDES', 'NPDES_IDS', 'CWA_COMPLIANCE_STATUS'],
      ['RCRA_FLAG', 'RCRA', 'RCRA_IDS', 'RCRA_COMPLIANCE_STATUS'],
      ['SDWIS_FLAG', 'SDWIS', 'SDWA_IDS', 'SDWA_COMPLIANCE_STATUS'],
    ]) {
      const on = has(system, i);
      set(flag, on ? 'Y' : 'N');
      if (on) {
        set(ids, programId[system](i));
        set(statusCol, r.chance(0.8) ? 'No Violation' : 'Violation Identified');
      }
    }
    set('TRI_FLAG', r.chance(0.03) ? 'Y' : 'N');
    set('GHG_FLAG', r.chance(0.01) ? 'Y' : 'N');
    set('DFR_URL', `https://echo.epa.gov/detailed-facility-report?fid=${id}`);
    const naics = [r.pick(NAICS)];
    if (r.chance(0.25)) naics.push(r.pick(NAICS));
    set('FAC_NAICS_CODES', naics.join(' '));
    set('FAC_SIC_CODES', r.pick(SICS));
    set('FAC_IMP_WATER_FLG', r.chance(0.1) ? 'Y' : 'N');
  });

  const airHolders = holders('AIR', n);
  const AIR_PROGRAMS = [
    ['CAASIP', 'State Implementation Plan for National Primary and Secondary Ambient Air Quality Standards'],
    ['CAATVP', 'Title V Permits'],
    ['CAAMACT', 'MACT Standards'],
    ['CAANSPS', 'New Source Performance Standards'],
  ];
  const POLLUTANTS = [
    ['300000329', 'VOLATILE ORGANIC COMPOUNDS (VOCS)'],
    ['300000244', 'PARTICULATE MATTER < 10 UM'],
    ['300000318', 'NITROGEN OXIDES (NOX)'],
    ['300000322', 'SULFUR DIOXIDE'],
  ];
  r = rand('ICIS-AIR_VIOLATION_HISTORY.csv');
  files['ICIS-AIR_VIOLATION_HISTORY.csv'] = await writeFile(dir, 'ICIS-AIR_VIOLATION_HISTORY.csv', air, (k, set) => {
    const i = holder('AIR', r.int(airHolders));
    const st = stateOf(i);
    const pgm = programId.AIR(i);
    set('PGM_SYS_ID', pgm);
    set('ACTIVITY_ID', String(3600000000 + k));
    set('AGENCY_TYPE_DESC', r.pick(['State', 'State', 'U.S. EPA', 'Local']));
    set('STATE_CODE', st);
    set('COMP_DETERMINATION_UID', `${pgm}${pad(k % 100000, 5)}`);
    const hpv = r.chance(0.25);
    set('ENF_RESPONSE_POLICY_CODE', hpv ? 'HPV' : 'FRV');
    const programs = [r.pick(AIR_PROGRAMS)];
    if (r.chance(0.3)) programs.push(r.pick(AIR_PROGRAMS));
    set('PROGRAM_CODES', csv(programs.map((p) => p[0]).join(', ')));
    set('PROGRAM_DESCS', csv(programs.map((p) => p[1]).join(', ')));
    if (r.chance(0.7)) {
      const p = r.pick(POLLUTANTS);
      set('POLLUTANT_CODES', p[0]);
      set('POLLUTANT_DESCS', csv(p[1]));
    }
    const day = r.int(14000);
    set('EARLIEST_FRV_DETERM_DATE', date(day, '-'));
    if (hpv) {
      set('HPV_DAYZERO_DATE', date(day + 5, '-'));
      if (r.chance(0.6)) set('HPV_RESOLVED_DATE', date(day + 30 + r.int(700), '-'));
    }
  });

  // RCRA's identity is a composite (handler, location, type, agency, date): handler h is used once
  // per round and each round has its own date window, so no two rows share it.
  const rcraHolders = holders('RCRA', n);
  let step = 7919;
  const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));
  while (gcd(step, rcraHolders) !== 1) step += 2;
  const rounds = Math.ceil(rcra / rcraHolders);
  const window = Math.floor(14000 / rounds);
  const RCRA_TYPES = [
    ['262.A', 'Standards Applicable to Generators of HW: General'],
    ['262.C', 'Standards Applicable to Generators of HW: Pre-Transport Requirements'],
    ['265.J', 'TSD IS-Tank Systems'],
    ['268.A', 'Land Disposal Restrictions: General'],
    ['273.B', 'Universal Waste: Small Quantity Handlers'],
    ['279.C', 'Used Oil: Generators'],
  ];
  r = rand('RCRA_VIOLATIONS.csv');
  files['RCRA_VIOLATIONS.csv'] = await writeFile(dir, 'RCRA_VIOLATIONS.csv', rcra, (k, set) => {
    const i = holder('RCRA', Number((BigInt(k) * BigInt(step)) % BigInt(rcraHolders)));
    const round = Math.floor(k / rcraHolders);
    const [type, desc] = r.pick(RCRA_TYPES);
    const day = round * window + r.int(window);
    set('ID_NUMBER', programId.RCRA(i));
    set('ACTIVITY_LOCATION', stateOf(i));
    set('VIOLATION_TYPE', type);
    set('VIOLATION_TYPE_DESC', csv(desc));
    set('VIOL_DETERMINED_BY_AGENCY', r.chance(0.7) ? 'S  ' : 'E  ');
    set('DATE_VIOLATION_DETERMINED', date(day));
    if (r.chance(0.75)) set('ACTUAL_RTC_DATE', date(day + 10 + r.int(400)));
    set('SCHEDULED_COMPLIANCE_DATE', date(day + 30 + r.int(90)));
  });

  const npdesHolders = holders('NPDES', n);
  const NPDES_CODES = [
    ['A0011', 'Sanitary Sewer Overflow'],
    ['A0012', 'Bypass, Unanticipated'],
    ['B0012', 'Failure to submit DMR'],
    ['E0090', 'Spill, Unauthorized Discharge'],
    ['C0005', 'Reporting Violation'],
  ];
  r = rand('NPDES_SE_VIOLATIONS.csv');
  files['NPDES_SE_VIOLATIONS.csv'] = await writeFile(dir, 'NPDES_SE_VIOLATIONS.csv', npdes, (k, set) => {
    const i = holder('NPDES', r.int(npdesHolders));
    const [code, desc] = r.pick(NPDES_CODES);
    const day = r.int(14000);
    set('NPDES_ID', programId.NPDES(i));
    set('NPDES_VIOLATION_ID', String(1000000000 + k));
    set('VIOLATION_TYPE_CODE', 'S');
    set('VIOLATION_CODE', code);
    set('VIOLATION_DESC', csv(desc));
    set('SINGLE_EVENT_VIOLATION_DATE', date(day));
    if (r.chance(0.5)) set('SINGLE_EVENT_END_DATE', date(day + r.int(30)));
    if (r.chance(0.3))
      set(
        'SINGLE_EVENT_VIOLATION_COMMENT',
        csv(
          r.chance(0.2)
            ? `Overflow at lift station ${r.int(20)}, about ${r.int(50000)} gallons.\r\nReported by phone.`
            : 'Reported by permittee',
        ),
      );
    set('SINGLE_EVENT_AGENCY_TYPE_CODE', r.pick(['ST', 'ST', 'EPA']));
    if (r.chance(0.2)) {
      set('RNC_DETECTION_CODE', r.pick(['G', 'N', 'E']));
      set('RNC_DETECTION_DESC', 'Manual 2A1 - Effluent Violation');
      set('RNC_DETECTION_DATE', date(day + 20));
      if (r.chance(0.6)) {
        set('RNC_RESOLUTION_CODE', r.pick(['1', '2', '4', 'A']));
        set('RNC_RESOLUTION_DESC', 'Resolved');
        set('RNC_RESOLUTION_DATE', date(day + 60 + r.int(300)));
      }
    }
  });

  // Cases: the same PRNG drives the four files in step (one pass per file, replayed from the seed).
  const caseOf = (k) => {
    const c = prng(base ^ h32(k, 7));
    const fy = 2000 + c.int(26);
    const st = STATES[c.int(STATES.length)];
    return { c, fy, st, number: `${STATE_REGION[st]}-${fy}-${pad(k, 4)}`, activity: String(3400000000 + k) };
  };
  files['CASE_ENFORCEMENTS.csv'] = await writeFile(dir, 'CASE_ENFORCEMENTS.csv', cases, (k, set) => {
    const { c, fy, st, number, activity } = caseOf(k);
    const judicial = c.chance(0.15);
    set('ACTIVITY_ID', activity);
    set('ACTIVITY_NAME', csv(`${c.pick(NAME_A)} ${c.pick(NAME_B)}, ${st}`));
    set('STATE_CODE', st);
    set('REGION_CODE', STATE_REGION[st]);
    set('FISCAL_YEAR', String(fy));
    set('CASE_NUMBER', number);
    set('CASE_NAME', csv(`${c.pick(NAME_A)} ${c.pick(NAME_B)}`));
    set('ACTIVITY_TYPE_CODE', judicial ? 'JDC' : 'AFR');
    set('ACTIVITY_TYPE_DESC', judicial ? 'Judicial' : 'Administrative - Formal');
    const status = c.pick(['CLS', 'CLS', 'CLS', 'FOI', 'ACT', 'LDG', 'REF']);
    set('ACTIVITY_STATUS_CODE', status);
    set('ACTIVITY_STATUS_DESC', { CLS: 'Closed', FOI: 'Final Order Issued', ACT: 'Active', LDG: 'Lodged', REF: 'Referred' }[status]);
    set('ACTIVITY_STATUS_DATE', date((fy - 1985) * 365 + c.int(700)));
    set('LEAD', c.pick(['EPA', 'EPA', 'State', '']));
    if (c.chance(0.6)) set('TOTAL_PENALTY_ASSESSED_AMT', String(500 * (1 + c.int(400))));
    set('HQ_DIVISION', c.pick(['AED', 'WED', 'SPD']));
    set('VOLUNTARY_SELF_DISCLOSURE_FLAG', c.chance(0.1) ? 'Y' : 'N');
    set('MULTIMEDIA_FLAG', c.chance(0.1) ? 'Y' : 'N');
    if (c.chance(0.5))
      set('ENF_SUMMARY_TEXT', csv('The facility failed to comply with permit conditions, including "monitoring" and reporting.'));
  });
  // CASE_FACILITIES: 1–3 facilities per case; rows numbered case by case.
  let caseFacilityCount = 0;
  for (let k = 0; k < cases; k++) caseFacilityCount += 1 + (h32(k, 11) % 3);
  let cursor = { k: 0, j: 0 };
  files['CASE_FACILITIES.csv'] = await writeFile(dir, 'CASE_FACILITIES.csv', caseFacilityCount, (_row, set) => {
    const { k, j } = cursor;
    const { number, activity } = caseOf(k);
    const i = h32(k, 13 + j) % n;
    set('ACTIVITY_ID', activity);
    set('CASE_NUMBER', number);
    set('REGISTRY_ID', registryId(i));
    set('FACILITY_NAME', 'FACILITY');
    set('STATE_CODE', stateOf(i));
    cursor = j + 1 < 1 + (h32(k, 11) % 3) ? { k, j: j + 1 } : { k: k + 1, j: 0 };
  });
  const concluded = (k) => h32(k, 17) % 10 < 7;
  const penalised = (k) => h32(k, 19) % 10 < 6;
  const count = (f) => {
    let c = 0;
    for (let k = 0; k < cases; k++) if (f(k)) c++;
    return c;
  };
  const walk = (f) => {
    let k = -1;
    return () => {
      do k++;
      while (!f(k));
      return k;
    };
  };
  let nextCase = walk(concluded);
  files['CASE_ENFORCEMENT_CONCLUSIONS.csv'] = await writeFile(dir, 'CASE_ENFORCEMENT_CONCLUSIONS.csv', count(concluded), (row, set) => {
    const k = nextCase();
    const { fy, number, activity } = caseOf(k);
    set('ACTIVITY_ID', activity);
    set('CASE_NUMBER', number);
    set('ENF_CONCLUSION_ID', String(5000000 + row));
    set('ENF_CONCLUSION_NAME', csv('Consent Agreement, Final Order'));
    set('SETTLEMENT_ENTERED_DATE', date((fy - 1985) * 365 + 100 + (h32(k, 23) % 600)));
    set('SETTLEMENT_FY', String(fy));
    set('PRIMARY_LAW', 'CAA');
  });
  nextCase = walk(penalised);
  files['CASE_PENALTIES.csv'] = await writeFile(dir, 'CASE_PENALTIES.csv', count(penalised), (_row, set) => {
    const k = nextCase();
    const { number, activity } = caseOf(k);
    set('ACTIVITY_ID', activity);
    set('CASE_NUMBER', number);
    set('FED_PENALTY', `${1000 + (h32(k, 29) % 500000)}.${pad(h32(k, 31) % 100, 2)}`);
    set('ST_LCL_PENALTY', '0');
  });

  const bytes = Object.values(files).reduce((a, b) => a + b, 0);
  return { dir, facilities: n, violations, cases, files, bytes };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dir = process.argv[2];
  if (!dir) {
    console.error('usage: node scripts/bench/echo-generate.mjs <out-dir>');
    process.exit(2);
  }
  const result = await generate(resolve(dir), {
    facilities: Number(process.env.BENCH_ECHO_FACILITIES ?? 1_000_000),
    seed: process.env.BENCH_ECHO_SEED ?? 'echo-bench',
  });
  console.log(JSON.stringify(result));
}
