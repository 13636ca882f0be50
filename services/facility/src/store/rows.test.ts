import { describe, expect, it } from 'vitest';
import { EMPTY_PROFILE } from '../demo/profile';
import { FIELDS, FACILITY_FIELDS as RECORD_FIELDS } from '../domain/records';
import {
  CASE_FIELDS,
  FACILITY_COLUMNS,
  FACILITY_FIELDS,
  toCase,
  toFacility,
  toViolation,
  VIOLATION_COLUMNS,
  VIOLATION_FIELDS,
} from './rows';

const UPDATED = new Date('2026-05-05T10:00:00.000Z');

describe('columns derived from the resources', () => {
  it('a facility is its id, its import fields in their order, data_as_of and updated_at', () => {
    expect(FACILITY_FIELDS).toEqual(['id', ...Object.keys(RECORD_FIELDS), 'data_as_of', 'updated_at']);
    expect(FACILITY_COLUMNS).toBe(FACILITY_FIELDS.join(', '));
  });

  it('a violation and a case swap their registry ids for the stored ids', () => {
    expect(VIOLATION_FIELDS).toEqual(['id', 'facility_id', 'facility_name', ...FIELDS.violations.slice(2)]);
    expect(VIOLATION_COLUMNS).toBe(
      'v.id, v.facility_id, f.name AS facility_name, v.program, v.violation_type, v.violation_date, v.severity, v.description, v.resolved_date',
    );
    expect(CASE_FIELDS).toEqual(['id', ...FIELDS.cases.filter((f) => f !== 'registry_ids'), 'facility_ids', 'updated_at']);
  });
});

describe('row mappers', () => {
  it('copy the representation fields in its order, timestamps as ISO 8601, and nothing else', () => {
    const row = {
      previous_status: 'violation',
      updated_at: UPDATED,
      id: 'c0a80000-0000-4000-8000-000000000001',
      registry_id: '110000000001',
      name: 'Gulf Refinery',
      street: null,
      city: 'Houston',
      state: 'TX',
      zip: null,
      county: null,
      latitude: 29.76,
      longitude: -95.37,
      naics_codes: ['324110'],
      programs: ['CAA' as const],
      compliance_status: 'violation' as const,
      last_inspection_date: '2024-02-29',
      ...EMPTY_PROFILE,
      // As jsonb returns it: keys in its own order, put back in the representation's.
      penalties: { last_date: null, count: 0, total_usd: null, last_amount_usd: null },
      data_as_of: new Date('2026-05-04T09:00:00.000Z'),
    };
    const facility = toFacility(row);
    expect(Object.keys(facility)).toEqual(FACILITY_FIELDS);
    expect(Object.keys(facility.penalties)).toEqual(['count', 'total_usd', 'last_amount_usd', 'last_date']);
    expect(facility.updated_at).toBe('2026-05-05T10:00:00.000Z');
    expect(facility).toEqual({
      ...row,
      previous_status: undefined,
      data_as_of: '2026-05-04T09:00:00.000Z',
      updated_at: '2026-05-05T10:00:00.000Z',
    });
  });

  it('map a violation (no timestamp) and a case', () => {
    const v = {
      id: 'v1',
      facility_id: 'f1',
      facility_name: 'Gulf Refinery',
      program: 'CAA' as const,
      violation_type: 'Emissions',
      violation_date: '2026-01-02',
      severity: 'significant' as const,
      description: null,
      resolved_date: null,
    };
    expect(toViolation(v)).toEqual(v);
    const c = toCase({
      id: 'c1',
      case_number: 'CASE-1',
      case_type: 'judicial' as const,
      status: 'filed' as const,
      lead_agency: 'EPA',
      filed_date: '2026-01-02',
      settled_date: null,
      penalty_amount_usd: '12500.00',
      facility_ids: ['f1'],
      updated_at: UPDATED,
    });
    expect([Object.keys(c), c.updated_at]).toEqual([CASE_FIELDS, '2026-05-05T10:00:00.000Z']);
  });
});
