import { type Static, Type } from '@sinclair/typebox';
import { schemasOf, Timestamp, Uuid } from './fields';
import { CASE_FIELDS, FACILITY_FIELDS, VIOLATION_FIELDS } from './records';

/**
 * The public representations (docs/facility.md): what the API returns and events carry. Each is
 * its resource's fields (domain/records.ts) with the ids and timestamps the store adds; the
 * routes serialise by these schemas, and the SQL columns and row mappers derive from them.
 */

/**
 * `data_as_of`: when the row was last written from its source (an ECHO sync, an import, the
 * demo data or the simulation); it is not an import field.
 */
export const FacilitySchema = Type.Object({ id: Uuid, ...schemasOf(FACILITY_FIELDS), data_as_of: Timestamp, updated_at: Timestamp });

export const ViolationSchema = Type.Object({
  id: Uuid,
  facility_id: Uuid,
  facility_name: Type.String(),
  ...schemasOf(VIOLATION_FIELDS),
});

export const CaseSchema = Type.Object({
  id: Uuid,
  ...schemasOf(CASE_FIELDS),
  facility_ids: Type.Array(Uuid),
  updated_at: Timestamp,
});

export type Facility = Static<typeof FacilitySchema>;
export type Violation = Static<typeof ViolationSchema>;
export type EnforcementCase = Static<typeof CaseSchema>;
