import { describe, expect, it } from 'vitest';
import type { CaseRecord, FacilityRecord } from '../domain/records';
import { createRng } from './prng';
import { EMPTY_PROFILE } from './profile';
import { planCaseProgress, planNewCase, planResolution, planViolation, worsened } from './simulation';

const facility: FacilityRecord = {
  registry_id: 'F1',
  name: 'Plant',
  street: null,
  city: 'Tulsa',
  state: 'OK',
  zip: null,
  county: null,
  latitude: null,
  longitude: null,
  naics_codes: [],
  programs: ['CAA'],
  compliance_status: 'no_violation',
  last_inspection_date: null,
  ...EMPTY_PROFILE,
};

describe('simulation', () => {
  it('worsens a facility status only upwards', () => {
    expect(worsened('no_violation', 'minor')).toBe('violation');
    expect(worsened('violation', 'significant')).toBe('significant_violation');
    expect(worsened('significant_violation', 'minor')).toBe('significant_violation');
  });

  it('a new violation is unresolved, dated today, and raises the facility status when it must', () => {
    const change = planViolation(createRng(1), facility, 'SIM-1', '2026-05-05');
    expect(change.violations).toHaveLength(1);
    expect(change.violations[0]).toMatchObject({
      source_id: 'SIM-1',
      registry_id: 'F1',
      program: 'CAA',
      violation_date: '2026-05-05',
      resolved_date: null,
    });
    const expected = worsened('no_violation', change.violations[0]?.severity ?? 'minor');
    expect(change.facilities).toEqual([{ ...facility, compliance_status: expected }]);
  });

  it('moves a case filed → active → settled (with settlement date) → closed, then stops', () => {
    const rng = createRng(2);
    let c: CaseRecord = planNewCase(rng, facility, 'T1', '2026-05-05').cases[0] as CaseRecord;
    expect(c).toMatchObject({ case_number: 'CAA-06-2026-SIM-T1', status: 'filed', registry_ids: ['F1'] });
    const seen: string[] = [c.status];
    for (;;) {
      const next = planCaseProgress(rng, c, '2026-06-01');
      if (!next) break;
      c = next.cases[0] as CaseRecord;
      seen.push(c.status);
    }
    expect(seen).toEqual(['filed', 'active', 'settled', 'closed']);
    expect(c.settled_date).toBe('2026-06-01');
  });

  it('returns a facility to compliance, and does nothing for one already compliant', () => {
    expect(planResolution({ ...facility, compliance_status: 'violation' }, '2026-05-05')?.facilities).toEqual([
      {
        ...facility,
        compliance_status: 'no_violation',
        last_inspection_date: '2026-05-05',
        inspections: { count: 1, last_date: '2026-05-05' },
      },
    ]);
    expect(planResolution(facility, '2026-05-05')).toBeUndefined();
  });
});
