import { describe, expect, it } from 'vitest';
import { eventFacilityIds, type MatchableEvent, matches } from './matching';

const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';
const F3 = '33333333-3333-4333-8333-333333333333';

const envelope = (type: string, data: MatchableEvent['data']): MatchableEvent => ({
  id: 'evt_9a8b7c6d-0000-4000-8000-000000000000',
  type,
  created_at: '2026-11-22T08:15:30.123Z',
  data,
});
const violation = (facility: string) => envelope('violation.new', { violation: { id: 'v', facility_id: facility } });
const caseEvent = (type: string, facilities: string[]) => envelope(type, { case: { id: 'c', facility_ids: facilities } });
const statusChanged = (facility: string) =>
  envelope('facility.status_changed', { facility: { id: facility }, previous_status: 'violation' });

describe('matches', () => {
  it('needs the event type to be one of the subscription events', () => {
    expect(matches({ events: ['violation.new'], facility_ids: null }, violation(F1))).toBe(true);
    expect(matches({ events: ['case.new'], facility_ids: null }, violation(F1))).toBe(false);
  });

  it('matches every facility when facility_ids is null', () => {
    const sub = { events: ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'], facility_ids: null };
    expect(matches(sub, violation(F3))).toBe(true);
    expect(matches(sub, caseEvent('case.new', [F2]))).toBe(true);
    expect(matches(sub, statusChanged(F1))).toBe(true);
    expect(matches(sub, caseEvent('case.updated', []))).toBe(true);
  });

  it('matches a watched facility only, whatever the case of the UUID', () => {
    const sub = { events: ['violation.new', 'facility.status_changed'], facility_ids: [F1.toUpperCase()] };
    expect(matches(sub, violation(F1))).toBe(true);
    expect(matches(sub, violation(F2))).toBe(false);
    expect(matches(sub, statusChanged(F1))).toBe(true);
    expect(matches(sub, statusChanged(F2))).toBe(false);
  });

  it('matches a case event when any of the case facilities is watched', () => {
    const sub = { events: ['case.new', 'case.updated'], facility_ids: [F2] };
    expect(matches(sub, caseEvent('case.new', [F1, F2]))).toBe(true);
    expect(matches(sub, caseEvent('case.updated', [F3, F2]))).toBe(true);
    expect(matches(sub, caseEvent('case.new', [F1, F3]))).toBe(false);
    expect(matches(sub, caseEvent('case.new', []))).toBe(false);
  });

  it('does not match a facility-restricted subscription to an event without facility references', () => {
    expect(matches({ events: ['violation.new'], facility_ids: [F1] }, envelope('violation.new', {}))).toBe(false);
    expect(matches({ events: ['webhook.test'], facility_ids: [F1] }, envelope('webhook.test', {}))).toBe(false);
  });
});

describe('eventFacilityIds', () => {
  it('reads the facility references of each event type', () => {
    expect(eventFacilityIds(violation(F1))).toEqual([F1]);
    expect(eventFacilityIds(caseEvent('case.updated', [F1, F2.toUpperCase()]))).toEqual([F1, F2]);
    expect(eventFacilityIds(statusChanged(F3))).toEqual([F3]);
    expect(eventFacilityIds(envelope('case.new', { case: { facility_ids: null } }))).toEqual([]);
  });
});
