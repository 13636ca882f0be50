import { describe, expect, it } from 'vitest';
import { PROGRAMS, STATES_AND_DC } from '../domain/codes';
import { parseCase, parseFacility, parseViolation } from '../domain/records';
import { generateDemoData, statusFromOpenViolations } from './demo-data';

describe('generateDemoData', () => {
  const data = generateDemoData({ facilities: 2000, seed: 'unit' });

  it('is deterministic for a seed and differs between seeds', () => {
    expect(generateDemoData({ facilities: 2000, seed: 'unit' })).toEqual(data);
    expect(generateDemoData({ facilities: 2000, seed: 'other' }).facilities.map((f) => f.name)).not.toEqual(
      data.facilities.map((f) => f.name),
    );
    // A smaller data set is a prefix of a larger one with the same seed.
    expect(generateDemoData({ facilities: 500, seed: 'unit' }).facilities).toEqual(data.facilities.slice(0, 500));
  });

  it('covers all 50 states and DC, and every program', () => {
    expect(new Set(data.facilities.map((f) => f.state))).toEqual(new Set(STATES_AND_DC));
    expect(new Set(generateDemoData({ facilities: 51, seed: 'x' }).facilities.map((f) => f.state)).size).toBe(51);
    expect(new Set(data.facilities.flatMap((f) => f.programs))).toEqual(new Set(PROGRAMS));
  });

  it('produces rows the importer accepts, with unique natural keys', () => {
    const fac = data.facilities.map((f) => parseFacility({ ...f }));
    const vio = data.violations.map((v) => parseViolation({ ...v }));
    const cas = data.cases.map((c) => parseCase({ ...c }));
    expect([...fac, ...vio, ...cas].filter((r) => !r.ok)).toEqual([]);
    expect(fac.map((r) => r.ok && r.record)).toEqual(data.facilities);
    expect(new Set(data.facilities.map((f) => f.registry_id)).size).toBe(data.facilities.length);
    expect(new Set(data.violations.map((v) => v.source_id)).size).toBe(data.violations.length);
    expect(new Set(data.cases.map((c) => c.case_number)).size).toBe(data.cases.length);
  });

  it('keeps the data consistent: statuses follow open violations, violations and cases name generated facilities, dates are before asOf', () => {
    const ids = new Set(data.facilities.map((f) => f.registry_id));
    for (const f of data.facilities) {
      const open = data.violations.filter((v) => v.registry_id === f.registry_id && v.resolved_date === null).map((v) => v.severity);
      expect(f.compliance_status).toBe(statusFromOpenViolations(open));
    }
    expect(data.violations.every((v) => ids.has(v.registry_id) && v.violation_date <= '2026-01-01')).toBe(true);
    expect(data.cases.every((c) => c.registry_ids.every((id) => ids.has(id)) && c.filed_date <= '2026-01-01')).toBe(true);
    expect(data.cases.some((c) => c.registry_ids.length > 1)).toBe(true);
    expect(new Set(data.cases.map((c) => c.status))).toEqual(new Set(['filed', 'active', 'settled', 'closed']));
    expect(data.cases.filter((c) => c.penalty_amount_usd !== null).every((c) => c.status === 'settled' || c.status === 'closed')).toBe(
      true,
    );
  });
});
