import type { CaseStatus, CaseType, Program, Severity } from './codes';
import type { FacilityRecord } from './records';

/** The public representations (docs/facility.md): what the API returns and events carry. */
export interface Facility extends FacilityRecord {
  id: string;
  updated_at: string;
}

export interface Violation {
  id: string;
  facility_id: string;
  facility_name: string;
  program: Program;
  violation_type: string;
  violation_date: string;
  severity: Severity;
  description: string | null;
  resolved_date: string | null;
}

export interface EnforcementCase {
  id: string;
  case_number: string;
  case_type: CaseType;
  status: CaseStatus;
  lead_agency: string;
  filed_date: string;
  settled_date: string | null;
  penalty_amount_usd: string | null;
  facility_ids: string[];
  updated_at: string;
}
