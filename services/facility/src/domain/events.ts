import { type EventEnvelope, envelope } from '@fcd/events/contract';
import type { IdSource } from '@fcd/service-kit/pure';
import type { CaseStatus, ComplianceStatus } from './codes';
import type { EnforcementCase, Facility, Violation } from './model';

/** The facility's events: the envelope of @fcd/events around the service's records. */
export type ViolationNewEvent = EventEnvelope<'violation.new', { violation: Violation }>;
export type CaseNewEvent = EventEnvelope<'case.new', { case: EnforcementCase }>;
export type CaseUpdatedEvent = EventEnvelope<'case.updated', { case: EnforcementCase; previous_status: CaseStatus }>;
export type FacilityStatusChangedEvent = EventEnvelope<
  'facility.status_changed',
  { facility: Facility; previous_status: ComplianceStatus }
>;
export type DomainEvent = ViolationNewEvent | CaseNewEvent | CaseUpdatedEvent | FacilityStatusChangedEvent;

export const events = {
  violationNew: (violation: Violation, createdAt: string, ids: IdSource): ViolationNewEvent =>
    envelope('violation.new', { violation }, createdAt, ids),
  caseNew: (c: EnforcementCase, createdAt: string, ids: IdSource): CaseNewEvent => envelope('case.new', { case: c }, createdAt, ids),
  caseUpdated: (c: EnforcementCase, previous: CaseStatus, createdAt: string, ids: IdSource): CaseUpdatedEvent =>
    envelope('case.updated', { case: c, previous_status: previous }, createdAt, ids),
  facilityStatusChanged: (f: Facility, previous: ComplianceStatus, createdAt: string, ids: IdSource): FacilityStatusChangedEvent =>
    envelope('facility.status_changed', { facility: f, previous_status: previous }, createdAt, ids),
};
