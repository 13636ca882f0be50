import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type EventFacets,
  eventFacets,
  FILTER_CODES,
  filterPasses,
  filterProblems,
  normaliseFilter,
  type SubscriptionFilter,
} from './filter';
import { type MatchableEvent, matches } from './matching';

const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';

const envelope = (type: string, data: MatchableEvent['data']): MatchableEvent => ({
  id: 'evt_9a8b7c6d-0000-4000-8000-000000000000',
  type,
  created_at: '2026-11-22T08:15:30.123Z',
  data,
});
const facility = (id: string, state: string, epa_region: string | null, programs: string[]) => ({ id, state, epa_region, programs });
const ohio = facility(F1, 'OH', '05', ['CAA', 'RCRA']);
const texas = facility(F2, 'TX', '06', ['CWA']);
const violation = (program: string, severity: string, snapshot?: ReturnType<typeof facility>) =>
  envelope('violation.new', {
    violation: { id: 'v', facility_id: snapshot?.id ?? F1, program, severity },
    ...(snapshot ? { facility: snapshot } : {}),
  });
const statusChanged = (snapshot: ReturnType<typeof facility>) =>
  envelope('facility.status_changed', { facility: snapshot, previous_status: 'violation' });
const caseEvent = (snapshots: Array<ReturnType<typeof facility>>) =>
  envelope('case.new', { case: { id: 'c', facility_ids: snapshots.map((f) => f.id) }, facilities: snapshots });

describe('eventFacets', () => {
  it('reads a status change from its facility snapshot; it has no severity', () => {
    expect(eventFacets(statusChanged(ohio))).toEqual({ states: ['OH'], programs: ['CAA', 'RCRA'], severities: null, epa_regions: ['05'] });
  });

  it("reads a violation's program and severity from the violation, its place from the facility snapshot", () => {
    expect(eventFacets(violation('CWA', 'significant', ohio))).toEqual({
      states: ['OH'],
      programs: ['CWA'],
      severities: ['significant'],
      epa_regions: ['05'],
    });
  });

  it('gives a violation without a facility snapshot no place', () => {
    expect(eventFacets(violation('CAA', 'minor'))).toEqual({ states: [], programs: ['CAA'], severities: ['minor'], epa_regions: [] });
  });

  it("reads a case's facets from all of its facility snapshots", () => {
    expect(eventFacets(caseEvent([ohio, texas]))).toEqual({
      states: ['OH', 'TX'],
      programs: ['CAA', 'CWA', 'RCRA'],
      severities: null,
      epa_regions: ['05', '06'],
    });
  });

  it('drops values that are not codes, and a null region', () => {
    const odd = envelope('facility.status_changed', { facility: { id: F1, state: "O'H", epa_region: null, programs: ['CAA', 7, 'A,B'] } });
    expect(eventFacets(odd)).toEqual({ states: [], programs: ['CAA'], severities: null, epa_regions: [] });
  });
});

describe('matches with a filter', () => {
  const all = ['violation.new', 'case.new', 'facility.status_changed'];

  it('passes only the events of a filtered state', () => {
    const sub = { events: all, facility_ids: null, filter: { states: ['OH'] } };
    expect(matches(sub, statusChanged(ohio))).toBe(true);
    expect(matches(sub, statusChanged(texas))).toBe(false);
    expect(matches(sub, violation('CAA', 'minor', ohio))).toBe(true);
    expect(matches(sub, violation('CAA', 'minor', texas))).toBe(false);
    expect(matches(sub, violation('CAA', 'minor'))).toBe(false);
    expect(matches(sub, caseEvent([texas, ohio]))).toBe(true);
    expect(matches(sub, caseEvent([texas]))).toBe(false);
  });

  it("matches programs against a violation's program, not its facility's", () => {
    const sub = { events: all, facility_ids: null, filter: { programs: ['CWA'] } };
    expect(matches(sub, violation('CWA', 'minor', ohio))).toBe(true);
    expect(matches(sub, violation('CAA', 'minor', texas))).toBe(false);
    expect(matches(sub, statusChanged(texas))).toBe(true);
    expect(matches(sub, statusChanged(ohio))).toBe(false);
  });

  it('lets events without a severity through a severities list', () => {
    const sub = { events: all, facility_ids: null, filter: { severities: ['significant'] } };
    expect(matches(sub, violation('CAA', 'significant', ohio))).toBe(true);
    expect(matches(sub, violation('CAA', 'minor', ohio))).toBe(false);
    expect(matches(sub, statusChanged(ohio))).toBe(true);
    expect(matches(sub, caseEvent([ohio]))).toBe(true);
  });

  it('needs every list and the facility ids', () => {
    const sub = { events: all, facility_ids: [F1], filter: { states: ['OH'], epa_regions: ['06'] } };
    expect(matches(sub, statusChanged(ohio))).toBe(false);
    expect(matches({ ...sub, filter: { states: ['OH'], epa_regions: ['05'] } }, statusChanged(ohio))).toBe(true);
    expect(matches({ ...sub, facility_ids: [F2], filter: { states: ['OH'] } }, statusChanged(ohio))).toBe(false);
  });

  it('filters nothing with a null filter', () => {
    expect(matches({ events: all, facility_ids: null, filter: null }, statusChanged(texas))).toBe(true);
  });
});

describe('filterProblems', () => {
  it('accepts absent, null and valid filters, in any case', () => {
    expect(filterProblems(undefined)).toEqual([]);
    expect(filterProblems(null)).toEqual([]);
    expect(filterProblems({ states: ['tx', 'OH'], programs: ['caa'], severities: ['Significant'], epa_regions: ['06', '10'] })).toEqual([]);
  });

  it('names each bad value, empty or too long list, duplicate and empty filter', () => {
    expect(filterProblems({ states: ['TX', 'XX', 'tx'], programs: [], severities: ['high'], epa_regions: ['6', '11', '01'] })).toEqual([
      { field: 'filter.states[1]', message: 'must be a USPS state code (two letters, e.g. "TX")' },
      { field: 'filter.states[2]', message: 'is a duplicate of filter.states[0]' },
      { field: 'filter.programs', message: 'must not be empty; leave it out to not filter on it' },
      { field: 'filter.severities[0]', message: 'must be one of minor, moderate, significant' },
      { field: 'filter.epa_regions[0]', message: 'must be an EPA region, two digits from "01" to "10"' },
      { field: 'filter.epa_regions[1]', message: 'must be an EPA region, two digits from "01" to "10"' },
    ]);
    expect(filterProblems({})).toEqual([
      { field: 'filter', message: 'must list at least one of states, programs, severities, epa_regions; send null for no filter' },
    ]);
    const tooMany = Array.from({ length: 61 }, () => 'TX');
    expect(filterProblems({ states: tooMany })[0]).toEqual({ field: 'filter.states', message: 'must list at most 60 values (got 61)' });
  });

  it('leaves shape problems (unknown keys, non-arrays, non-strings) to the JSON schema', () => {
    expect(filterProblems({ states: 'TX', counties: ['x'], programs: [1] })).toEqual([]);
  });
});

describe('normaliseFilter', () => {
  it('stores canonical case in key order, and null for none', () => {
    expect(normaliseFilter({ epa_regions: ['06'], severities: ['MINOR'], states: ['tx'] })).toEqual({
      states: ['TX'],
      severities: ['minor'],
      epa_regions: ['06'],
    });
    expect(normaliseFilter(null)).toBeNull();
    expect(normaliseFilter(undefined)).toBeNull();
  });
});

describe('filterPasses (property)', () => {
  const list = <T extends string>(codes: readonly T[]) => fc.uniqueArray(fc.constantFrom(...codes), { minLength: 1, maxLength: 4 });
  const filterArb: fc.Arbitrary<SubscriptionFilter | null> = fc.option(
    fc.record(
      {
        states: list(FILTER_CODES.states),
        programs: list(FILTER_CODES.programs),
        severities: list(FILTER_CODES.severities),
        epa_regions: list(FILTER_CODES.epa_regions),
      },
      { requiredKeys: [] },
    ),
  );
  const snapshotArb = fc.record({
    state: fc.constantFrom(...FILTER_CODES.states),
    epa_region: fc.constantFrom(...FILTER_CODES.epa_regions),
    programs: fc.uniqueArray(fc.constantFrom(...FILTER_CODES.programs), { maxLength: 4 }),
  });
  const eventArb = fc.oneof(
    fc.record({
      type: fc.constant('violation.new'),
      facility: fc.option(snapshotArb, { nil: undefined }),
      program: fc.constantFrom(...FILTER_CODES.programs),
      severity: fc.constantFrom(...FILTER_CODES.severities),
    }),
    fc.record({ type: fc.constantFrom('case.new', 'case.updated'), facilities: fc.array(snapshotArb, { maxLength: 3 }) }),
    fc.record({ type: fc.constant('facility.status_changed'), facility: snapshotArb }),
  );

  /** The documented rule, written out per list and per event type, independently of eventFacets. */
  function spec(filter: SubscriptionFilter | null, e: Record<string, unknown>): boolean {
    if (filter === null) return true;
    const facilities = ('facilities' in e ? e.facilities : e.facility ? [e.facility] : []) as Array<{
      state: string;
      epa_region: string;
      programs: string[];
    }>;
    const any = (wanted: string[] | undefined, have: string[]) => wanted === undefined || wanted.some((w) => have.includes(w));
    const isViolation = e.type === 'violation.new';
    return (
      any(
        filter.states,
        facilities.map((f) => f.state),
      ) &&
      any(
        filter.epa_regions,
        facilities.map((f) => f.epa_region),
      ) &&
      any(filter.programs, isViolation ? [e.program as string] : facilities.flatMap((f) => f.programs)) &&
      (!isViolation || any(filter.severities, [e.severity as string]))
    );
  }

  function toEnvelope(e: Record<string, unknown>): MatchableEvent {
    if (e.type === 'violation.new') {
      return envelope('violation.new', {
        violation: { id: 'v', facility_id: F1, program: e.program, severity: e.severity },
        ...(e.facility ? { facility: e.facility as Record<string, unknown> } : {}),
      });
    }
    if (e.type === 'facility.status_changed') return envelope(e.type, { facility: e.facility as Record<string, unknown> });
    return envelope(e.type as string, { case: { id: 'c', facility_ids: [] }, facilities: e.facilities });
  }

  it('equals the AND of the lists given, each matched by any of the event values', () => {
    fc.assert(
      fc.property(filterArb, eventArb, (filter, e) => {
        const facets: EventFacets = eventFacets(toEnvelope(e));
        expect(filterPasses(filter, facets)).toBe(spec(filter, e));
      }),
      { numRuns: 2000 },
    );
  });
});
