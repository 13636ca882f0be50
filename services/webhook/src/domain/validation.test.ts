import { describe, expect, it } from 'vitest';
import {
  emptyPatchProblems,
  eventProblems,
  facilityIdProblems,
  MAX_REPORTED_PROBLEMS,
  mergeProblems,
  unknownFacilityProblems,
} from './validation';

const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';

describe('eventProblems', () => {
  it('accepts distinct known event types and ignores values the schema reports', () => {
    expect(eventProblems(['violation.new', 'case.new', 'case.updated', 'facility.status_changed'])).toEqual([]);
    expect(eventProblems('violation.new')).toEqual([]);
    expect(eventProblems(undefined)).toEqual([]);
    expect(eventProblems([3, 'case.new'])).toEqual([]);
  });

  it('names empty lists, unknown types and duplicates by index', () => {
    expect(eventProblems([])).toEqual([{ field: 'events', message: 'must list at least one event type' }]);
    expect(eventProblems(['case.new', 'case.closed', 'case.new'])).toEqual([
      { field: 'events[1]', message: 'must be one of violation.new, case.new, case.updated, facility.status_changed' },
      { field: 'events[2]', message: 'is a duplicate of events[0]' },
    ]);
  });
});

describe('facilityIdProblems', () => {
  it('collects distinct lower-cased UUIDs to check, with the index each first appeared at', () => {
    const { problems, candidates } = facilityIdProblems([F1.toUpperCase(), F2]);
    expect(problems).toEqual([]);
    expect([...candidates]).toEqual([
      [F1, 0],
      [F2, 1],
    ]);
  });

  it('refuses an empty list, non-UUIDs, duplicates and more than 1,000 ids', () => {
    expect(facilityIdProblems([]).problems).toEqual([
      { field: 'facility_ids', message: 'must not be empty; omit it or send null to watch every facility' },
    ]);
    expect(facilityIdProblems([F1, 'x', F1.toUpperCase(), 7]).problems).toEqual([
      { field: 'facility_ids[1]', message: 'must be a UUID' },
      { field: 'facility_ids[2]', message: 'is a duplicate of facility_ids[0]' },
    ]);
    const tooMany = facilityIdProblems(Array.from({ length: 1001 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`));
    expect(tooMany.problems).toEqual([{ field: 'facility_ids', message: 'must list at most 1000 facility ids (got 1001)' }]);
    expect(tooMany.candidates.size).toBe(0);
    expect(facilityIdProblems(null)).toEqual({ problems: [], candidates: new Map() });
  });

  it('lists each unknown facility by index and id', () => {
    const { candidates } = facilityIdProblems([F1, F2]);
    expect(unknownFacilityProblems(candidates, new Set([F2]))).toEqual([
      { field: 'facility_ids[0]', message: `no facility with id ${F1} exists` },
    ]);
  });
});

describe('emptyPatchProblems', () => {
  it('refuses an empty object only', () => {
    expect(emptyPatchProblems({})).toEqual([
      {
        field: 'body',
        message: 'must contain at least one of url, events, facility_ids, filter, is_active, rate_limit_per_second, max_in_flight',
      },
    ]);
    expect(emptyPatchProblems({ is_active: true })).toEqual([]);
    expect(emptyPatchProblems({ colour: 'red' })).toEqual([]);
  });
});

describe('mergeProblems', () => {
  it('removes repeats and orders by field, then index, then arrival', () => {
    expect(
      mergeProblems(
        [
          { field: 'colour', message: 'is not a known field' },
          { field: 'events[10]', message: 'must be string' },
        ],
        [
          { field: 'events[2]', message: 'is a duplicate of events[0]' },
          { field: 'url', message: 'must use https' },
          { field: 'url', message: 'must use https' },
        ],
      ),
    ).toEqual([
      { field: 'url', message: 'must use https' },
      { field: 'events[2]', message: 'is a duplicate of events[0]' },
      { field: 'events[10]', message: 'must be string' },
      { field: 'colour', message: 'is not a known field' },
    ]);
  });

  it('caps a very long list with one summary entry', () => {
    const many = Array.from({ length: 150 }, (_, i) => ({ field: `facility_ids[${i}]`, message: 'must be a UUID' }));
    const merged = mergeProblems(many);
    expect(merged).toHaveLength(MAX_REPORTED_PROBLEMS + 1);
    expect(merged[MAX_REPORTED_PROBLEMS]).toEqual({ field: 'body', message: '50 more problems not listed' });
  });
});
