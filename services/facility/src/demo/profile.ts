import type { CaseRecord, FacilityRecord } from '../domain/records';
import { REGION_BY_STATE } from './geography';
import { createRng } from './prng';

/**
 * The compliance profile of a demo facility (docs/facility.md), consistent with the rest of its
 * demo data: region from its state, program statuses from its programs and compliance status,
 * enforcement and penalties from its cases. Its own PRNG (seed and registry id) keeps the demo
 * data's main sequence, and so every other value, as it was.
 */

export type Profile = Pick<
  FacilityRecord,
  'epa_region' | 'sic_codes' | 'major' | 'program_status' | 'compliance' | 'inspections' | 'enforcement' | 'penalties'
>;

/** What a facility without a profile holds (the columns' defaults). */
export const EMPTY_PROFILE: Profile = {
  epa_region: null,
  sic_codes: [],
  major: false,
  program_status: { caa: null, cwa: null, rcra: null },
  compliance: { quarters_with_noncompliance: 0, programs_with_snc: 0, snc: false },
  inspections: { count: 0, last_date: null },
  enforcement: { informal_actions: 0, formal_actions: 0, last_formal_action_date: null },
  penalties: { count: 0, total_usd: null, last_amount_usd: null, last_date: null },
};

/** SIC codes by the first two digits of a NAICS code (a plausible pick, not a crosswalk). */
const SIC_BY_NAICS: Record<string, readonly string[]> = {
  '21': ['1311', '1442'],
  '22': ['4911', '4952', '4941'],
  '31': ['2011', '2086'],
  '32': ['2869', '2911', '2821', '3241'],
  '33': ['3312', '3471', '3714'],
  '42': ['5171'],
  '48': ['4226', '4613'],
  '49': ['4226'],
  '56': ['4953'],
  '92': ['9511'],
};

const STATUS_TEXT = {
  no_violation: 'No Violation Identified',
  violation: 'Violation Identified',
} as const;

export function demoProfile(seed: string, f: FacilityRecord, cases: readonly CaseRecord[]): Profile {
  const rng = createRng(`${seed}:profile:${f.registry_id}`);
  const region = REGION_BY_STATE.get(f.state);
  const sics = SIC_BY_NAICS[(f.naics_codes[0] ?? '').slice(0, 2)] ?? ['8999'];
  const bad = f.compliance_status !== 'no_violation';
  const snc = f.compliance_status === 'significant_violation';
  const status = (program: 'CAA' | 'CWA' | 'RCRA'): string | null => {
    if (!f.programs.includes(program)) return null;
    if (snc && program === 'CAA') return 'High Priority Violation';
    if (snc) return 'Significant Violation';
    return bad && rng.chance(0.7) ? STATUS_TEXT.violation : STATUS_TEXT.no_violation;
  };
  const mine = cases.filter((c) => c.registry_ids.includes(f.registry_id));
  const formal = mine.filter((c) => c.case_type !== 'administrative_informal');
  const penalized = mine.filter((c) => c.penalty_amount_usd !== null).sort((a, b) => (a.filed_date < b.filed_date ? -1 : 1));
  const last = penalized.at(-1);
  const lastFiled =
    formal
      .map((c) => c.filed_date)
      .sort()
      .at(-1) ?? null;
  return {
    epa_region: region === undefined ? null : String(region).padStart(2, '0'),
    sic_codes: [rng.pick(sics)],
    major: rng.chance(0.2),
    program_status: { caa: status('CAA'), cwa: status('CWA'), rcra: status('RCRA') },
    compliance: {
      quarters_with_noncompliance: snc ? rng.int(4, 12) : bad ? rng.int(1, 8) : rng.int(0, 1),
      programs_with_snc: snc ? 1 : 0,
      snc,
    },
    inspections: { count: f.last_inspection_date ? rng.int(1, 9) : 0, last_date: f.last_inspection_date },
    enforcement: { informal_actions: bad ? rng.int(0, 3) : 0, formal_actions: formal.length, last_formal_action_date: lastFiled },
    penalties: {
      count: penalized.length,
      total_usd: penalized.length ? penalized.reduce((s, c) => s + Number(c.penalty_amount_usd), 0) : null,
      last_amount_usd: last ? Number(last.penalty_amount_usd) : null,
      last_date: last ? (last.settled_date ?? last.filed_date) : null,
    },
  };
}
