import type { CaseStatus, CaseType, ComplianceStatus, Program, Severity } from '../domain/codes';
import type { CaseRecord, FacilityRecord, ViolationRecord } from '../domain/records';
import { GEOGRAPHY, REGION_BY_STATE, type StateInfo } from './geography';
import { createRng, type Rng } from './prng';
import { demoProfile, EMPTY_PROFILE } from './profile';

/**
 * Deterministic demo data: the same (facilities, seed, asOf) always gives the
 * same records, so the quick start, the tests and the benchmark share one data
 * set. Facilities are spread over all 50 states and DC (the first 51 take one
 * state each, the rest follow population), with realistic industries (NAICS),
 * ECHO programs, violations and enforcement cases. Pure: no clock, no I/O.
 */
export interface DemoOptions {
  facilities: number;
  seed: string | number;
  /** The "today" of the data set (YYYY-MM-DD); dates fall in the five years before it. */
  asOf?: string;
}

export interface DemoData {
  facilities: FacilityRecord[];
  violations: ViolationRecord[];
  cases: CaseRecord[];
}

export const DEFAULT_AS_OF = '2026-01-01';

interface Industry {
  naics: readonly string[];
  programs: readonly Program[];
  names: readonly string[];
  weight: number;
  /** Named after the city (public utilities) rather than a company. */
  municipal?: boolean;
}

const INDUSTRIES: readonly Industry[] = [
  { naics: ['324110'], programs: ['CAA', 'CWA', 'RCRA'], names: ['Refinery', 'Refining Complex'], weight: 3 },
  { naics: ['221112'], programs: ['CAA', 'CWA'], names: ['Generating Station', 'Power Plant', 'Energy Center'], weight: 5 },
  { naics: ['325110', '325199', '325211'], programs: ['CAA', 'CWA', 'RCRA'], names: ['Chemical Plant', 'Chemical Works'], weight: 6 },
  { naics: ['221310'], programs: ['SDWA'], names: ['Water System', 'Water Treatment Plant'], weight: 12, municipal: true },
  {
    naics: ['221320'],
    programs: ['CWA'],
    names: ['Wastewater Treatment Plant', 'Water Reclamation Facility'],
    weight: 10,
    municipal: true,
  },
  { naics: ['331110'], programs: ['CAA', 'CWA', 'RCRA'], names: ['Steel Works', 'Steel Mill'], weight: 2 },
  { naics: ['322121'], programs: ['CAA', 'CWA'], names: ['Paper Mill', 'Pulp and Paper Mill'], weight: 2 },
  { naics: ['562211'], programs: ['RCRA', 'CAA'], names: ['Waste Treatment Facility', 'Disposal Facility'], weight: 2 },
  { naics: ['311611', '311615'], programs: ['CWA'], names: ['Meat Processing Plant', 'Poultry Plant'], weight: 3 },
  { naics: ['327310'], programs: ['CAA'], names: ['Cement Plant'], weight: 2 },
  { naics: ['336111', '336390'], programs: ['CAA', 'RCRA'], names: ['Assembly Plant', 'Auto Parts Plant'], weight: 3 },
  { naics: ['424710'], programs: ['CAA', 'RCRA'], names: ['Bulk Terminal', 'Fuel Terminal'], weight: 4 },
  { naics: ['811111', '811121'], programs: ['RCRA'], names: ['Auto Repair', 'Collision Center'], weight: 10 },
  { naics: ['332813'], programs: ['RCRA', 'CWA'], names: ['Plating Works', 'Metal Finishing'], weight: 4 },
  { naics: ['212321', '212312'], programs: ['CAA', 'CWA'], names: ['Quarry', 'Sand and Gravel Pit'], weight: 2 },
  { naics: ['112120', '112310'], programs: ['CWA'], names: ['Dairy', 'Egg Farm'], weight: 2 },
];

const COMPANY_WORDS = [
  'Allied',
  'Apex',
  'Atlas',
  'Bayou',
  'Blue Ridge',
  'Cardinal',
  'Cedar',
  'Centennial',
  'Coastal',
  'Continental',
  'Crescent',
  'Eagle',
  'Evergreen',
  'Frontier',
  'Granite',
  'Great Lakes',
  'Harbor',
  'Heartland',
  'Highland',
  'Keystone',
  'Liberty',
  'Magnolia',
  'Meridian',
  'Midland',
  'Northstar',
  'Oak Ridge',
  'Pacific',
  'Patriot',
  'Piedmont',
  'Pinnacle',
  'Prairie',
  'Red River',
  'Ridgeway',
  'Riverside',
  'Sierra',
  'Silver Creek',
  'Southern',
  'Sterling',
  'Summit',
  'Sunbelt',
  'Tidewater',
  'Union',
  'Valley',
  'Westfield',
];
const COMPANY_SUFFIXES = ['', '', ' LLC', ' Inc', ' Co', ' LP'];
const STREETS = ['Industrial', 'Refinery', 'River', 'Plant', 'Commerce', 'Harbor', 'Mill', 'Railroad', 'Quarry', 'Lake', 'Ridge', 'Valley'];
const STREET_KINDS = ['Rd', 'Pkwy', 'Blvd', 'Dr', 'Ave', 'Hwy'];

/** Violation types by program, after ECHO's categories. */
const VIOLATION_TYPES: Record<Program, readonly string[]> = {
  CAA: [
    'Emission limit exceedance',
    'Failure to monitor',
    'Late or missing report',
    'Permit condition violation',
    'Leak detection and repair',
    'Opacity exceedance',
  ],
  CWA: [
    'Effluent limit exceedance',
    'Discharge monitoring report not received',
    'Unauthorized discharge',
    'Sanitary sewer overflow',
    'Compliance schedule violation',
  ],
  RCRA: ['Hazardous waste storage', 'Manifest violation', 'Generator requirements', 'Used oil management', 'Land disposal restrictions'],
  SDWA: ['Maximum contaminant level exceedance', 'Monitoring and reporting', 'Treatment technique violation', 'Public notification'],
};

const SEVERITY_WEIGHTS: ReadonlyArray<[Severity, number]> = [
  ['minor', 50],
  ['moderate', 35],
  ['significant', 15],
];

const DAY_MS = 86_400_000;

function addDays(date: string, days: number): string {
  return new Date(Date.parse(`${date}T00:00:00Z`) + days * DAY_MS).toISOString().slice(0, 10);
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

/** FRS-style 12-digit registry id, unique per index. */
function demoRegistryId(index: number): string {
  return `1100${pad(index + 1, 8)}`;
}

/** Compliance status implied by a facility's unresolved violations. */
export function statusFromOpenViolations(open: readonly Severity[]): ComplianceStatus {
  if (open.includes('significant')) return 'significant_violation';
  return open.length > 0 ? 'violation' : 'no_violation';
}

function makeFacility(rng: Rng, index: number, st: StateInfo, asOf: string): FacilityRecord {
  const industry = rng.weighted(INDUSTRIES, (i) => i.weight);
  const city = rng.pick(st.cities);
  const label = rng.pick(industry.names);
  const name = industry.municipal ? `${city.city} ${label}` : `${rng.pick(COMPANY_WORDS)} ${label}${rng.pick(COMPANY_SUFFIXES)}`;
  const naics = [rng.pick(industry.naics)];
  return {
    registry_id: demoRegistryId(index),
    name,
    street: `${rng.int(1, 9899)} ${rng.pick(STREETS)} ${rng.pick(STREET_KINDS)}`,
    city: city.city,
    state: st.code,
    zip: city.zip,
    county: city.county,
    latitude: Math.round((city.lat + (rng.next() - 0.5) * 0.3) * 1e5) / 1e5,
    longitude: Math.round((city.lon + (rng.next() - 0.5) * 0.3) * 1e5) / 1e5,
    naics_codes: naics,
    programs: [...industry.programs].sort(),
    compliance_status: 'no_violation',
    last_inspection_date: rng.chance(0.85) ? addDays(asOf, -rng.int(1, 3 * 365)) : null,
    // Filled once its violations and cases are known (demo/profile.ts).
    ...EMPTY_PROFILE,
  };
}

export function makeViolation(rng: Rng, facility: FacilityRecord, sourceId: string, date: string, asOf: string): ViolationRecord {
  const program = rng.pick(facility.programs.length > 0 ? facility.programs : (['RCRA'] as Program[]));
  const severity = rng.weighted(SEVERITY_WEIGHTS, ([, w]) => w)[0];
  const violation_type = rng.pick(VIOLATION_TYPES[program]);
  let resolved_date: string | null = null;
  if (rng.chance(0.7)) {
    const candidate = addDays(date, rng.int(10, 400));
    if (candidate <= asOf) resolved_date = candidate;
  }
  return {
    source_id: sourceId,
    registry_id: facility.registry_id,
    program,
    violation_type,
    violation_date: date,
    severity,
    description: `${violation_type} (${program}) identified at ${facility.name}, ${facility.city ?? ''}, ${facility.state}.`,
    resolved_date,
  };
}

const CASE_TYPE_WEIGHTS: ReadonlyArray<[CaseType, number]> = [
  ['administrative_informal', 30],
  ['administrative_formal', 60],
  ['judicial', 10],
];

/** A penalty between $5,000 and $2,000,000 (log-uniform), rounded to $100. */
export function makePenalty(rng: Rng): string {
  const amount = Math.round(Math.exp(Math.log(5000) + rng.next() * (Math.log(2_000_000) - Math.log(5000))) / 100) * 100;
  return `${amount}.00`;
}

function makeCase(rng: Rng, caseNumber: string, registryIds: string[], filedDate: string, asOf: string): CaseRecord {
  const case_type = rng.weighted(CASE_TYPE_WEIGHTS, ([, w]) => w)[0];
  const ageDays = (Date.parse(asOf) - Date.parse(filedDate)) / DAY_MS;
  let status: CaseStatus = 'filed';
  if (ageDays > 60)
    status = rng.weighted<[CaseStatus, number]>(
      [
        ['active', 30],
        ['settled', 30],
        ['closed', 40],
      ],
      ([, w]) => w,
    )[0];
  let settled_date: string | null = null;
  let penalty: string | null = null;
  if (status === 'settled' || status === 'closed') {
    const d = addDays(filedDate, rng.int(60, 700));
    settled_date = d <= asOf ? d : asOf;
    if (case_type !== 'administrative_informal') penalty = makePenalty(rng);
  }
  return {
    case_number: caseNumber,
    case_type,
    status,
    lead_agency: rng.chance(0.4) ? 'EPA' : 'State',
    filed_date: filedDate,
    settled_date,
    penalty_amount_usd: penalty,
    registry_ids: [...registryIds].sort(),
  };
}

/** ECHO-style case number: <program>-<EPA region>-<year>-<serial>. */
function caseNumber(program: Program, state: string, filedDate: string, serial: number): string {
  return `${program}-${pad(REGION_BY_STATE.get(state) ?? 0, 2)}-${filedDate.slice(0, 4)}-${pad(serial, 5)}`;
}

export function generateDemoData(options: DemoOptions): DemoData {
  const asOf = options.asOf ?? DEFAULT_AS_OF;
  const rng = createRng(`${options.seed}`);
  const facilities: FacilityRecord[] = [];
  const violations: ViolationRecord[] = [];
  const cases: CaseRecord[] = [];
  const byState = new Map<string, FacilityRecord[]>();
  let caseSerial = 0;
  /** Each facility's cases so far, by registry id (for its profile). */
  const casesOf = new Map<string, CaseRecord[]>();

  for (let i = 0; i < options.facilities; i++) {
    const st = i < GEOGRAPHY.length ? (GEOGRAPHY[i] as StateInfo) : rng.weighted(GEOGRAPHY, (s) => s.weight);
    const facility = makeFacility(rng, i, st, asOf);

    const roll = rng.next();
    const count = roll < 0.6 ? 0 : roll < 0.8 ? 1 : roll < 0.9 ? 2 : rng.int(3, 6);
    const mine: ViolationRecord[] = [];
    for (let v = 0; v < count; v++) {
      const date = addDays(asOf, -rng.int(1, 5 * 365));
      mine.push(makeViolation(rng, facility, `${facility.registry_id}-V${pad(v + 1, 3)}`, date, asOf));
    }
    facility.compliance_status = statusFromOpenViolations(mine.filter((v) => v.resolved_date === null).map((v) => v.severity));
    violations.push(...mine);

    const peers = byState.get(st.code) ?? [];
    if (mine.length > 0 && rng.chance(0.3)) {
      const first = mine.reduce((a, b) => (a.violation_date <= b.violation_date ? a : b));
      const filed = addDays(first.violation_date, rng.int(14, 180));
      if (filed <= asOf) {
        const involved = [facility.registry_id];
        // Some cases involve several facilities of the same state (a company's sites).
        if (peers.length > 0 && rng.chance(0.15)) {
          for (let k = rng.int(1, 2); k > 0; k--) {
            const peer = rng.pick(peers).registry_id;
            if (!involved.includes(peer)) involved.push(peer);
          }
        }
        caseSerial++;
        const c = makeCase(rng, caseNumber(first.program, st.code, filed, caseSerial), involved, filed, asOf);
        cases.push(c);
        for (const id of involved) casesOf.set(id, [...(casesOf.get(id) ?? []), c]);
      }
    }
    // Its profile from the cases so far (a later peer's case is left out: a smaller data set
    // stays a prefix of a larger one).
    Object.assign(facility, demoProfile(`${options.seed}`, facility, casesOf.get(facility.registry_id) ?? []));
    peers.push(facility);
    byState.set(st.code, peers);
    facilities.push(facility);
  }
  return { facilities, violations, cases };
}
