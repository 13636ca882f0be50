/**
 * Code lists of the facility domain, grounded in EPA ECHO: USPS state codes,
 * the four ECHO media programs, compliance statuses, violation severities and
 * enforcement case types/statuses.
 */

/** The 50 states and DC (the demo data covers all of them). */
export const STATES_AND_DC = [
  'AL',
  'AK',
  'AZ',
  'AR',
  'CA',
  'CO',
  'CT',
  'DE',
  'DC',
  'FL',
  'GA',
  'HI',
  'ID',
  'IL',
  'IN',
  'IA',
  'KS',
  'KY',
  'LA',
  'ME',
  'MD',
  'MA',
  'MI',
  'MN',
  'MS',
  'MO',
  'MT',
  'NE',
  'NV',
  'NH',
  'NJ',
  'NM',
  'NY',
  'NC',
  'ND',
  'OH',
  'OK',
  'OR',
  'PA',
  'RI',
  'SC',
  'SD',
  'TN',
  'TX',
  'UT',
  'VT',
  'VA',
  'WA',
  'WV',
  'WI',
  'WY',
] as const;

/** Territories with USPS codes that ECHO also covers. */
const TERRITORIES = ['AS', 'GU', 'MP', 'PR', 'VI'] as const;

export const STATE_CODES: readonly string[] = [...STATES_AND_DC, ...TERRITORIES];
const STATE_SET = new Set(STATE_CODES);

/** Upper-cases a USPS code; undefined when it is not a known one. */
export function normalizeState(value: string): string | undefined {
  const upper = value.trim().toUpperCase();
  return STATE_SET.has(upper) ? upper : undefined;
}

/** ECHO media programs: Clean Air Act, Clean Water Act, RCRA (hazardous waste), Safe Drinking Water Act. */
export const PROGRAMS = ['CAA', 'CWA', 'RCRA', 'SDWA'] as const;
export type Program = (typeof PROGRAMS)[number];

export const COMPLIANCE_STATUSES = ['no_violation', 'violation', 'significant_violation'] as const;
export type ComplianceStatus = (typeof COMPLIANCE_STATUSES)[number];

/**
 * Violation severity. `significant` corresponds to ECHO's High Priority
 * Violation (CAA), Significant Noncompliance (CWA, RCRA) and Serious Violator (SDWA).
 */
export const SEVERITIES = ['minor', 'moderate', 'significant'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** ECHO enforcement action types. */
export const CASE_TYPES = ['administrative_informal', 'administrative_formal', 'judicial'] as const;
export type CaseType = (typeof CASE_TYPES)[number];

/** Case life cycle: filed → active → settled → closed. */
export const CASE_STATUSES = ['filed', 'active', 'settled', 'closed'] as const;
export type CaseStatus = (typeof CASE_STATUSES)[number];
