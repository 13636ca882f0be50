// The data and helpers of the synthetic ECHO download (echo-generate.mjs): the published headers,
// a seeded PRNG and hash, the facility attributes that are pure functions of a facility's index
// (state, registry id, program ids), the vocabularies rows draw from, and the streaming CSV writer.
import { once } from 'node:events';
import { createWriteStream, readFileSync, statSync } from 'node:fs';
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
export function h32(a, b = 0) {
  let x = (Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x27d4eb2f, 0xc2b2ae35)) >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
}

/** mulberry32: a small seeded PRNG, one per file so each file is reproducible on its own. */
export function prng(seed) {
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

export function seedOf(text) {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

export const pad = (n, w) => String(n).padStart(w, '0');
export const csv = (v) => (/[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);

// States weighted roughly as ECHO's facility counts (big states repeat), with EPA regions.
export const STATE_REGION = {
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
export const STATES = [...Object.keys(STATE_REGION), ...'CA CA CA TX TX TX NY NY PA PA OH OH IL FL FL MI NJ GA NC'.split(' ')];
export const stateOf = (i) => STATES[h32(i, 1) % STATES.length];

// Program membership by i % 20: AIR 25 %, NPDES 30 %, RCRA 50 %, SDWA 10 %, some none.
const SLOTS = { AIR: [0, 1, 2, 3, 4], NPDES: [3, 4, 5, 6, 7, 8], RCRA: [6, 7, 8, 9, 10, 11, 12, 13, 14, 15], SDWIS: [16, 17] };
export const has = (system, i) => SLOTS[system].includes(i % 20);
/** How many of facilities 0..n-1 hold a program, and the index of the h-th of them. */
export const holders = (system, n) => Math.floor(n / 20) * SLOTS[system].length + SLOTS[system].filter((s) => s < n % 20).length;
export const holder = (system, h) => 20 * Math.floor(h / SLOTS[system].length) + SLOTS[system][h % SLOTS[system].length];

export const registryId = (i) => String(110000000001 + i * 13);
export const programId = {
  AIR: (i) => `${stateOf(i)}0000${pad(i, 12)}`,
  NPDES: (i) => `${stateOf(i)}${pad(i, 7)}`,
  RCRA: (i) => `${stateOf(i)}D${pad(i, 9)}`,
  SDWIS: (i) => `${stateOf(i)}${pad(i + 1000000, 7)}`,
};

const DAY = 86_400_000;
const EPOCH_1985 = Date.UTC(1985, 0, 1);
/** A date `days` after 1985-01-01, as MM/DD/YYYY (or with another separator). */
export function date(days, sep = '/') {
  const d = new Date(EPOCH_1985 + days * DAY);
  return `${pad(d.getUTCMonth() + 1, 2)}${sep}${pad(d.getUTCDate(), 2)}${sep}${d.getUTCFullYear()}`;
}
export const recentDate = (r) => date(9000 + r.int(5000)); // 2009 – 2022

export const NAME_A = [
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
export const NAME_B = [
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
export const NAME_C = ['', '', '', ' INC', ' LLC', ', INC.', ', LLC', ' CO', ' CORP', ' - PLANT 2', ' #1042', ' "NORTH SITE"'];
export const STREETS = [
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
export const CITIES = [
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
export const COUNTIES = [
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
export const STATUS = [
  [0.68, 'No Violation Identified'],
  [0.83, 'Violation Identified'],
  [0.88, 'Significant Violation'],
  [0.9, 'High Priority Violation'],
  [0.95, 'Inactive'],
  [0.98, 'Unknown'],
  [1, ''],
];
export const NAICS = [
  '332813',
  '221320',
  '332312',
  '332710',
  '325211',
  '811121',
  '812320',
  '424710',
  '562212',
  '311612',
  '486210',
  '447110',
];
export const SICS = ['3471', '4952', '3441', '2821', '7532', '7216', '5171', '4953', '2011', '4922', '5541'];
export const HIST = '_VS';

/** Writes rows to a file in 64 KiB chunks, waiting for the stream to drain (never holds the file). */
export async function writeFile(dir, name, count, row) {
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
