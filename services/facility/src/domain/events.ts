import type { IdSource } from '@fcd/service-kit';
import type { CaseStatus, ComplianceStatus, EventType } from './codes';
import type { EnforcementCase, Facility, Violation } from './model';

/** The event envelope (docs/webhooks.md), as published on JetStream and delivered to webhooks. */
export interface EventEnvelope<T extends EventType = EventType, D = Record<string, unknown>> {
  id: string;
  type: T;
  created_at: string;
  data: D;
}

export type ViolationNewEvent = EventEnvelope<'violation.new', { violation: Violation }>;
export type CaseNewEvent = EventEnvelope<'case.new', { case: EnforcementCase }>;
export type CaseUpdatedEvent = EventEnvelope<'case.updated', { case: EnforcementCase; previous_status: CaseStatus }>;
export type FacilityStatusChangedEvent = EventEnvelope<
  'facility.status_changed',
  { facility: Facility; previous_status: ComplianceStatus }
>;
export type DomainEvent = ViolationNewEvent | CaseNewEvent | CaseUpdatedEvent | FacilityStatusChangedEvent;

function envelope<T extends EventType, D>(type: T, data: D, createdAt: string, ids: IdSource): EventEnvelope<T, D> {
  return { id: `evt_${ids()}`, type, created_at: createdAt, data };
}

export const events = {
  violationNew: (violation: Violation, createdAt: string, ids: IdSource): ViolationNewEvent =>
    envelope('violation.new', { violation }, createdAt, ids),
  caseNew: (c: EnforcementCase, createdAt: string, ids: IdSource): CaseNewEvent => envelope('case.new', { case: c }, createdAt, ids),
  caseUpdated: (c: EnforcementCase, previous: CaseStatus, createdAt: string, ids: IdSource): CaseUpdatedEvent =>
    envelope('case.updated', { case: c, previous_status: previous }, createdAt, ids),
  facilityStatusChanged: (f: Facility, previous: ComplianceStatus, createdAt: string, ids: IdSource): FacilityStatusChangedEvent =>
    envelope('facility.status_changed', { facility: f, previous_status: previous }, createdAt, ids),
};

/** The JetStream subject of an event type: `<prefix>.<type>`, e.g. `events.violation.new`. */
export function subjectFor(prefix: string, type: EventType): string {
  return `${prefix}.${type}`;
}

/** The uuid part of an event id (the outbox primary key). */
export function eventUuid(eventId: string): string {
  return eventId.startsWith('evt_') ? eventId.slice(4) : eventId;
}
