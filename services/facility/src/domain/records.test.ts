import { describe, expect, it } from 'vitest';
import { EMPTY_PROFILE } from '../demo/profile';
import { FIELDS, isCalendarDate, parseCase, parseFacility, parseViolation } from './records';

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
        // The profile left out: its defaults (counts 0, flags false, the rest null).
        ...EMPTY_PROFILE,
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

describe('parseFacility: the compliance profile', () => {
  const base = { registry_id: 'R1', name: 'Plant', state: 'TX', compliance_status: 'violation' };
  const profile = {
    epa_region: '06',
    sic_codes: ['2911', '2869'],
    major: true,
    program_status: { caa: 'High Priority Violation', cwa: 'Violation Identified', rcra: null },
    compliance: { quarters_with_noncompliance: 7, programs_with_snc: 1, snc: false },
    inspections: { count: 6, last_date: '2024-03-01' },
    enforcement: { informal_actions: 2, formal_actions: 1, last_formal_action_date: '2024-05-02' },
    penalties: { count: 1, total_usd: 187500, last_amount_usd: 187500, last_date: '2025-08-19' },
  };
  const expected = { ...profile, sic_codes: ['2869', '2911'] };

  it('the CSV header names each group sub-field as group.sub', () => {
    expect(FIELDS.facilities.slice(13)).toEqual([
      'epa_region',
      'sic_codes',
      'major',
      'program_status.caa',
      'program_status.cwa',
      'program_status.rcra',
      'compliance.quarters_with_noncompliance',
      'compliance.programs_with_snc',
      'compliance.snc',
      'inspections.count',
      'inspections.last_date',
      'enforcement.informal_actions',
      'enforcement.formal_actions',
      'enforcement.last_formal_action_date',
      'penalties.count',
      'penalties.total_usd',
      'penalties.last_amount_usd',
      'penalties.last_date',
    ]);
  });

  it('reads the groups as JSON objects', () => {
    const r = parseFacility({ ...base, ...profile });
    expect(r.ok && r.record).toMatchObject(expected);
  });

  it('reads the groups from CSV cells named group.sub; empty cells are null, 0 or false', () => {
    const r = parseFacility({
      ...base,
      epa_region: '06',
      sic_codes: '2911;2869',
      major: 'Y',
      'program_status.caa': 'High Priority Violation',
      'program_status.cwa': 'Violation Identified',
      'program_status.rcra': '',
      'compliance.quarters_with_noncompliance': '7',
      'compliance.programs_with_snc': '1',
      'compliance.snc': 'false',
      'inspections.count': '6',
      'inspections.last_date': '2024-03-01',
      'enforcement.informal_actions': '2',
      'enforcement.formal_actions': '1',
      'enforcement.last_formal_action_date': '2024-05-02',
      'penalties.count': '1',
      'penalties.total_usd': '187500',
      'penalties.last_amount_usd': '187500.00',
      'penalties.last_date': '2025-08-19',
    });
    expect(r.ok && r.record).toMatchObject(expected);
    const empty = parseFacility({ ...base, 'compliance.quarters_with_noncompliance': '', 'penalties.total_usd': '', major: '' });
    expect(empty.ok && empty.record).toMatchObject(EMPTY_PROFILE);
  });

  it('names every bad profile value as group.sub', () => {
    const r = parseFacility({
      ...base,
      epa_region: '11',
      sic_codes: '28',
      major: 'maybe',
      program_status: 'CAA',
      compliance: { quarters_with_noncompliance: 1.5, snc: 'Y', extra: 1 },
      penalties: { total_usd: -1, last_date: '08/19/2025' },
    });
    expect(r).toEqual({
      ok: false,
      problems: [
        { field: 'epa_region', message: 'must be an EPA region 01 to 10' },
        { field: 'sic_codes', message: 'must be SIC codes of 4 digits' },
        { field: 'major', message: 'must be true or false' },
        { field: 'program_status', message: 'must be an object' },
        { field: 'compliance.extra', message: 'is not a known field' },
        { field: 'compliance.quarters_with_noncompliance', message: 'must be a whole number' },
        { field: 'penalties.total_usd', message: 'must be a number from 0 to 10000000000000' },
        { field: 'penalties.last_date', message: 'must be a date YYYY-MM-DD' },
      ],
    });
  });
});
