import type { CaseStatus, CaseType, ComplianceStatus, Program, Severity } from '../domain/codes';
import type { EnforcementCase, Facility, Violation } from '../domain/model';
import { FIELDS } from '../domain/records';

/** Column lists and row → representation mappers shared by the read and write SQL. */
/** A facility's columns, in the representation's order: its id, the import fields (domain/records.ts), updated_at. */
export const FACILITY_FIELDS: readonly string[] = ['id', ...FIELDS.facilities, 'updated_at'];
export const FACILITY_COLUMNS = FACILITY_FIELDS.join(', ');

export const CASE_FIELDS: readonly string[] = [
  'id',
  'case_number',
  'case_type',
  'status',
  'lead_agency',
  'filed_date',
  'settled_date',
  'penalty_amount_usd',
  'facility_ids',
  'updated_at',
];
export const CASE_COLUMNS = CASE_FIELDS.join(', ');

export interface FacilityRow {
  id: string;
  registry_id: string;
  name: string;
  street: string | null;
  city: string | null;
  state: string;
  zip: string | null;
  county: string | null;
  latitude: number | null;
  longitude: number | null;
  naics_codes: string[];
  programs: string[];
  compliance_status: string;
  last_inspection_date: string | null;
  updated_at: Date;
}

export interface ViolationRow {
  id: string;
  facility_id: string;
  facility_name: string;
  program: string;
  violation_type: string;
  violation_date: string;
  severity: string;
  description: string | null;
  resolved_date: string | null;
}

export interface CaseRow {
  id: string;
  case_number: string;
  case_type: string;
  status: string;
  lead_agency: string;
  filed_date: string;
  settled_date: string | null;
  penalty_amount_usd: string | null;
  facility_ids: string[];
  updated_at: Date;
}

export function toFacility(r: FacilityRow): Facility {
  return {
    id: r.id,
    registry_id: r.registry_id,
    name: r.name,
    street: r.street,
    city: r.city,
    state: r.state,
    zip: r.zip,
    county: r.county,
    latitude: r.latitude,
    longitude: r.longitude,
    naics_codes: r.naics_codes,
    programs: r.programs as Program[],
    compliance_status: r.compliance_status as ComplianceStatus,
    last_inspection_date: r.last_inspection_date,
    updated_at: r.updated_at.toISOString(),
  };
}

export function toViolation(r: ViolationRow): Violation {
  return {
    id: r.id,
    facility_id: r.facility_id,
    facility_name: r.facility_name,
    program: r.program as Program,
    violation_type: r.violation_type,
    violation_date: r.violation_date,
    severity: r.severity as Severity,
    description: r.description,
    resolved_date: r.resolved_date,
  };
}

export function toCase(r: CaseRow): EnforcementCase {
  return {
    id: r.id,
    case_number: r.case_number,
    case_type: r.case_type as CaseType,
    status: r.status as CaseStatus,
    lead_agency: r.lead_agency,
    filed_date: r.filed_date,
    settled_date: r.settled_date,
    penalty_amount_usd: r.penalty_amount_usd,
    facility_ids: r.facility_ids,
    updated_at: r.updated_at.toISOString(),
  };
}
