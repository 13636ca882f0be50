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
// The data and the CSV writer are in echo-data.mjs, the case files in echo-cases.mjs.
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeCases } from './echo-cases.mjs';
import {
  CITIES,
  COUNTIES,
  csv,
  date,
  HIST,
  has,
  holder,
  holders,
  NAICS,
  NAME_A,
  NAME_B,
  NAME_C,
  pad,
  prng,
  programId,
  recentDate,
  registryId,
  SICS,
  STATE_REGION,
  STATUS,
  STREETS,
  seedOf,
  stateOf,
  writeFile,
} from './echo-data.mjs';

/** The Exporter's name, address and flag columns of facility `i`. */
function exporterIdentity(r, set, i) {
  const st = stateOf(i);
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
}

/** The Exporter's location columns (96 % of facilities have them). */
function exporterLocation(r, set) {
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
}

/** The Exporter's inspection, enforcement and compliance columns. */
function exporterCompliance(r, set) {
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
}

/** The Exporter's program columns of facility `i` (its program ids, a pure function of `i`). */
function exporterPrograms(r, set, i, id) {
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
}

/** ECHO_EXPORTER.csv: `n` facilities. */
function writeExporter(dir, r, n) {
  return writeFile(dir, 'ECHO_EXPORTER.csv', n, (i, set) => {
    const id = registryId(i);
    set('REGISTRY_ID', id);
    exporterIdentity(r, set, i);
    exporterLocation(r, set);
    exporterCompliance(r, set);
    exporterPrograms(r, set, i, id);
  });
}

/** ICIS-AIR_VIOLATION_HISTORY.csv: `count` violations of random AIR holders among `n` facilities. */
function writeAirViolations(dir, r, n, count) {
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
  return writeFile(dir, 'ICIS-AIR_VIOLATION_HISTORY.csv', count, (k, set) => {
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
}

/** RCRA_VIOLATIONS.csv: `rcra` violations of the RCRA holders among `n` facilities. */
function writeRcraViolations(dir, r, n, rcra) {
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
  return writeFile(dir, 'RCRA_VIOLATIONS.csv', rcra, (k, set) => {
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
}

/** NPDES_SE_VIOLATIONS.csv: `count` violations of random NPDES holders among `n` facilities. */
function writeNpdesViolations(dir, r, n, count) {
  const npdesHolders = holders('NPDES', n);
  const NPDES_CODES = [
    ['A0011', 'Sanitary Sewer Overflow'],
    ['A0012', 'Bypass, Unanticipated'],
    ['B0012', 'Failure to submit DMR'],
    ['E0090', 'Spill, Unauthorized Discharge'],
    ['C0005', 'Reporting Violation'],
  ];
  return writeFile(dir, 'NPDES_SE_VIOLATIONS.csv', count, (k, set) => {
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

  files['ECHO_EXPORTER.csv'] = await writeExporter(dir, rand('ECHO_EXPORTER.csv'), n);
  files['ICIS-AIR_VIOLATION_HISTORY.csv'] = await writeAirViolations(dir, rand('ICIS-AIR_VIOLATION_HISTORY.csv'), n, air);
  files['RCRA_VIOLATIONS.csv'] = await writeRcraViolations(dir, rand('RCRA_VIOLATIONS.csv'), n, rcra);
  files['NPDES_SE_VIOLATIONS.csv'] = await writeNpdesViolations(dir, rand('NPDES_SE_VIOLATIONS.csv'), n, npdes);
  Object.assign(files, await writeCases(dir, base, n, cases));

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
