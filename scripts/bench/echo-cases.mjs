// The four ICIS-FE&C case files of the synthetic ECHO download (echo-generate.mjs): enforcement
// cases, the facilities of each, conclusions and penalties.
import { csv, date, h32, NAME_A, NAME_B, pad, prng, registryId, STATE_REGION, STATES, stateOf, writeFile } from './echo-data.mjs';

/** Case `k`'s own PRNG and attributes (the same PRNG drives the four files in step, replayed from the seed). */
const caseAttributes = (base) => (k) => {
  const c = prng(base ^ h32(k, 7));
  const fy = 2000 + c.int(26);
  const st = STATES[c.int(STATES.length)];
  return { c, fy, st, number: `${STATE_REGION[st]}-${fy}-${pad(k, 4)}`, activity: String(3400000000 + k) };
};

/** CASE_ENFORCEMENTS.csv: one row per case. */
function writeEnforcements(dir, caseOf, cases) {
  return writeFile(dir, 'CASE_ENFORCEMENTS.csv', cases, (k, set) => {
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
}

/** CASE_FACILITIES.csv: 1–3 facilities (among `n`) per case; rows numbered case by case. */
function writeCaseFacilities(dir, caseOf, cases, n) {
  let caseFacilityCount = 0;
  for (let k = 0; k < cases; k++) caseFacilityCount += 1 + (h32(k, 11) % 3);
  let cursor = { k: 0, j: 0 };
  return writeFile(dir, 'CASE_FACILITIES.csv', caseFacilityCount, (_row, set) => {
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
}

/** Numbers of the cases for which `f` holds, one per call, in order. */
const walk = (f) => {
  let k = -1;
  return () => {
    do k++;
    while (!f(k));
    return k;
  };
};

/** CASE_ENFORCEMENT_CONCLUSIONS.csv (70 % of cases) and CASE_PENALTIES.csv (60 %). */
async function writeConclusionsAndPenalties(dir, caseOf, cases) {
  const files = {};
  const concluded = (k) => h32(k, 17) % 10 < 7;
  const penalised = (k) => h32(k, 19) % 10 < 6;
  const count = (f) => {
    let c = 0;
    for (let k = 0; k < cases; k++) if (f(k)) c++;
    return c;
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
  return files;
}

/** The four case files: `cases` cases over `n` facilities; resolves with each file's size. */
export async function writeCases(dir, base, n, cases) {
  const caseOf = caseAttributes(base);
  return {
    'CASE_ENFORCEMENTS.csv': await writeEnforcements(dir, caseOf, cases),
    'CASE_FACILITIES.csv': await writeCaseFacilities(dir, caseOf, cases, n),
    ...(await writeConclusionsAndPenalties(dir, caseOf, cases)),
  };
}
