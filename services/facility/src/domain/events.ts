import { type EventEnvelope, envelope } from '@fcd/events/contract';
import type { IdSource } from '@fcd/service-kit/pure';
import type { CaseStatus, ComplianceStatus } from './codes';
import type { EnforcementCase, Facility, Violation } from './model';

/**
 * The facility's events: the envelope of @fcd/events around the service's records. Each carries
 * the facilities it is about as they stand when it is written (docs/webhooks.md "Event payloads"):
 * `facility` for a violation (its facility) and a status change, `facilities` for a case (one per
 * `case.facility_ids`, in that order); a subscription's filter reads them from the payload.
 */
export type ViolationNewEvent = EventEnvelope<'violation.new', { violation: Violation; facility: Facility }>;
export type CaseNewEvent = EventEnvelope<'case.new', { case: EnforcementCase; facilities: Facility[] }>;
export type CaseUpdatedEvent = EventEnvelope<
  'case.updated',
  { case: EnforcementCase; previous_status: CaseStatus; facilities: Facility[] }
>;
export type FacilityStatusChangedEvent = EventEnvelope<
  'facility.status_changed',
  { facility: Facility; previous_status: ComplianceStatus }
>;
export type DomainEvent = ViolationNewEvent | CaseNewEvent | CaseUpdatedEvent | FacilityStatusChangedEvent;

/** A facility's snapshot by id (store/snapshots.ts reads them in the event's transaction). */
export type FacilitySnapshotOf = (facilityId: string) => Facility;

export const events = {
  violationNew: (violation: Violation, snapshot: FacilitySnapshotOf, createdAt: string, ids: IdSource): ViolationNewEvent =>
    envelope('violation.new', { violation, facility: snapshot(violation.facility_id) }, createdAt, ids),
  caseNew: (c: EnforcementCase, snapshot: FacilitySnapshotOf, createdAt: string, ids: IdSource): CaseNewEvent =>
    envelope('case.new', { case: c, facilities: c.facility_ids.map(snapshot) }, createdAt, ids),
  caseUpdated: (
    c: EnforcementCase,
    previous: CaseStatus,
    snapshot: FacilitySnapshotOf,
    createdAt: string,
    ids: IdSource,
  ): CaseUpdatedEvent =>
    envelope('case.updated', { case: c, previous_status: previous, facilities: c.facility_ids.map(snapshot) }, createdAt, ids),
  facilityStatusChanged: (f: Facility, previous: ComplianceStatus, createdAt: string, ids: IdSource): FacilityStatusChangedEvent =>
    envelope('facility.status_changed', { facility: f, previous_status: previous }, createdAt, ids),
};
