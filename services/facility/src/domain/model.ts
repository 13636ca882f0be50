import type { CaseStatus, CaseType, ComplianceStatus, Program, Severity } from './codes';

/** The public representations (docs/facility.md): what the API returns and events carry. */
export interface Facility {
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
  programs: Program[];
  compliance_status: ComplianceStatus;
  last_inspection_date: string | null;
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
