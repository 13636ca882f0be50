import { describe, expect, it } from 'vitest';
import { isCalendarDate, parseCase, parseFacility, parseViolation } from './records';

describe('parseFacility', () => {
  it('normalises a CSV-style row: trims, upper-cases the state, splits and sorts lists, empty cells become null', () => {
    const r = parseFacility({
      registry_id: ' 110000000001 ',
      name: 'Gulf Refinery',
      street: '',
      city: 'Houston',
      state: 'tx',
      zip: '77002-1234',
      county: '',
      latitude: '29.76',
      longitude: '-95.37',
      naics_codes: '324110; 325110',
      programs: 'rcra|CAA caa',
      compliance_status: 'Violation',
      last_inspection_date: '2024-02-29',
    });
    expect(r).toEqual({
      ok: true,
      record: {
        registry_id: '110000000001',
        name: 'Gulf Refinery',
        street: null,
        city: 'Houston',
        state: 'TX',
        zip: '77002-1234',
        county: null,
        latitude: 29.76,
        longitude: -95.37,
        naics_codes: ['324110', '325110'],
        programs: ['CAA', 'RCRA'],
        compliance_status: 'violation',
        last_inspection_date: '2024-02-29',
      },
    });
  });

  it('reports every problem of a row at once, by field', () => {
    const r = parseFacility({
      name: 'x'.repeat(201),
      state: 'ZZ',
      zip: '1234',
      latitude: 91,
      naics_codes: ['12a'],
      programs: ['CAA', 'NOPE'],
      compliance_status: 'fine',
      last_inspection_date: '2023-02-29',
      colour: 'red',
    });
    expect(r).toEqual({
      ok: false,
      problems: [
        { field: 'colour', message: 'is not a known field' },
        { field: 'registry_id', message: 'is required' },
        { field: 'name', message: 'must be at most 200 characters' },
        { field: 'state', message: 'must be a USPS state code' },
        { field: 'zip', message: 'must be a ZIP code (12345 or 12345-6789)' },
        { field: 'latitude', message: 'must be a number from -90 to 90' },
        { field: 'naics_codes', message: 'must be NAICS codes of 2 to 6 digits' },
        { field: 'programs', message: 'must each be one of CAA, CWA, RCRA, SDWA' },
        { field: 'compliance_status', message: 'must be one of no_violation, violation, significant_violation' },
        { field: 'last_inspection_date', message: 'must be a date YYYY-MM-DD' },
      ],
    });
  });

  it('accepts DC and the territories, and rejects non-string values', () => {
    expect(parseFacility({ registry_id: '1', name: 'a', state: 'dc', compliance_status: 'no_violation' }).ok).toBe(true);
    expect(parseFacility({ registry_id: '1', name: 'a', state: 'PR', compliance_status: 'no_violation' }).ok).toBe(true);
    expect(parseFacility({ registry_id: '1', name: { x: 1 }, state: 'TX', compliance_status: 'no_violation' })).toEqual({
      ok: false,
      problems: [{ field: 'name', message: 'must be a string' }],
    });
  });
});

describe('parseViolation', () => {
  const base = {
    source_id: 'V1',
    registry_id: 'F1',
    program: 'cwa',
    violation_type: 'Effluent',
    violation_date: '2025-05-01',
    severity: 'MINOR',
  };

  it('normalises codes and keeps optional fields null', () => {
    expect(parseViolation(base)).toEqual({
      ok: true,
      record: { ...base, program: 'CWA', severity: 'minor', description: null, resolved_date: null },
    });
  });

  it('refuses a resolution before the violation', () => {
    expect(parseViolation({ ...base, resolved_date: '2025-04-30' })).toEqual({
      ok: false,
      problems: [{ field: 'resolved_date', message: 'must not be before violation_date' }],
    });
  });
});

describe('parseCase', () => {
  const base = {
    case_number: 'C1',
    case_type: 'judicial',
    status: 'settled',
    lead_agency: 'EPA',
    filed_date: '2025-01-01',
    registry_ids: 'B A,A',
  };

  it('formats the penalty with two decimals and sorts and de-duplicates registry ids', () => {
    for (const [input, out] of [
      [12500, '12500.00'],
      ['0012500.5', '12500.50'],
      ['7', '7.00'],
      [0.1, '0.10'],
    ] as const) {
      const r = parseCase({ ...base, penalty_amount_usd: input });
      expect(r.ok && r.record.penalty_amount_usd).toBe(out);
      expect(r.ok && r.record.registry_ids).toEqual(['A', 'B']);
    }
  });

  it('refuses negative or over-precise penalties and a case without facilities', () => {
    expect(parseCase({ ...base, penalty_amount_usd: -1, registry_ids: [] })).toEqual({
      ok: false,
      problems: [
        { field: 'penalty_amount_usd', message: 'must be a non-negative amount in dollars with at most 2 decimals' },
        { field: 'registry_ids', message: 'must list at least one facility registry_id' },
      ],
    });
    expect(parseCase({ ...base, penalty_amount_usd: '1.005' }).ok).toBe(false);
  });
});

describe('isCalendarDate', () => {
  it('accepts real dates only', () => {
    expect(['2024-02-29', '2025-12-31', '2000-01-01'].map(isCalendarDate)).toEqual([true, true, true]);
    expect(['2023-02-29', '2025-13-01', '2025-1-01', '20250101', '2025-04-31'].map(isCalendarDate)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});
