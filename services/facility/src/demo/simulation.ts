import type { CaseStatus, ComplianceStatus, Severity } from '../domain/codes';
import type { CaseRecord, FacilityRecord, ViolationRecord } from '../domain/records';
import { makePenalty, makeViolation } from './demo-data';
import { REGION_BY_STATE } from './geography';
import type { Rng } from './prng';

/**
 * What `simulate` does next, as import rows (pure; the runner loads the
 * current records and ingests the result, so the usual events follow):
 * a new violation (and the facility's status worsens when it must), a new
 * case, a case moving along filed → active → settled → closed, or a facility
 * returning to compliance.
 */
export interface SimChange {
  action: SimAction;
  facilities: FacilityRecord[];
  violations: ViolationRecord[];
  cases: CaseRecord[];
}

export type SimAction = 'violation' | 'case' | 'progress' | 'resolve';

const ACTION_WEIGHTS: ReadonlyArray<[SimAction, number]> = [
  ['violation', 45],
  ['case', 20],
  ['progress', 25],
  ['resolve', 10],
];

export function chooseAction(rng: Rng): SimAction {
  return rng.weighted(ACTION_WEIGHTS, ([, w]) => w)[0];
}

const RANK: Record<ComplianceStatus, number> = { no_violation: 0, violation: 1, significant_violation: 2 };

export function worsened(current: ComplianceStatus, severity: Severity): ComplianceStatus {
  const implied: ComplianceStatus = severity === 'significant' ? 'significant_violation' : 'violation';
  return RANK[implied] > RANK[current] ? implied : current;
}

export function planViolation(rng: Rng, facility: FacilityRecord, sourceId: string, today: string): SimChange {
  const v = { ...makeViolation(rng, facility, sourceId, today, today), resolved_date: null };
  const status = worsened(facility.compliance_status, v.severity);
  return {
    action: 'violation',
    facilities: status === facility.compliance_status ? [] : [{ ...facility, compliance_status: status }],
    violations: [v],
    cases: [],
  };
}

/** `tag` makes the case number unique across simulation runs. */
export function planNewCase(rng: Rng, facility: FacilityRecord, tag: string, today: string): SimChange {
  const program = rng.pick(facility.programs.length > 0 ? facility.programs : (['RCRA'] as const));
  const c: CaseRecord = {
    case_number: `${program}-${String(REGION_BY_STATE.get(facility.state) ?? 0).padStart(2, '0')}-${today.slice(0, 4)}-SIM-${tag}`,
    case_type: rng.chance(0.15) ? 'judicial' : 'administrative_formal',
    status: 'filed',
    lead_agency: rng.chance(0.4) ? 'EPA' : 'State',
    filed_date: today,
    settled_date: null,
    penalty_amount_usd: null,
    registry_ids: [facility.registry_id],
  };
  return { action: 'case', facilities: [], violations: [], cases: [c] };
}

const NEXT_STATUS: Record<CaseStatus, CaseStatus | undefined> = {
  filed: 'active',
  active: 'settled',
  settled: 'closed',
  closed: undefined,
};

/** The case one step further along; undefined when it is closed. */
export function planCaseProgress(rng: Rng, c: CaseRecord, today: string): SimChange | undefined {
  const next = NEXT_STATUS[c.status];
  if (!next) return undefined;
  const updated: CaseRecord = { ...c, status: next };
  if (next === 'settled') {
    updated.settled_date = today < c.filed_date ? c.filed_date : today;
    if (c.case_type !== 'administrative_informal') updated.penalty_amount_usd = makePenalty(rng);
  }
  return { action: 'progress', facilities: [], violations: [], cases: [updated] };
}

/** The facility back in compliance; undefined when it already is. */
export function planResolution(facility: FacilityRecord, today: string): SimChange | undefined {
  if (facility.compliance_status === 'no_violation') return undefined;
  return {
    action: 'resolve',
    facilities: [
      {
        ...facility,
        compliance_status: 'no_violation',
        last_inspection_date: today,
        inspections: { count: facility.inspections.count + 1, last_date: today },
      },
    ],
    violations: [],
    cases: [],
  };
}
