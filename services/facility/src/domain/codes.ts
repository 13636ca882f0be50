/**
 * Code lists of the facility domain, grounded in EPA ECHO: USPS state codes,
 * the four ECHO media programs and violation severities (the event contract's,
 * @fcd/events/contract), compliance statuses and enforcement case types/statuses.
 */

import { STATE_CODES } from '@fcd/events/contract';

// The lists events carry are the event contract's (libs/events/src/codes.ts), shared with webhook filters.
export { PROGRAMS, type Program, SEVERITIES, type Severity, STATE_CODES, STATES_AND_DC } from '@fcd/events/contract';

const STATE_SET = new Set(STATE_CODES);

/** Upper-cases a USPS code; undefined when it is not a known one. */
export function normalizeState(value: string): string | undefined {
  const upper = value.trim().toUpperCase();
  return STATE_SET.has(upper) ? upper : undefined;
}

export const COMPLIANCE_STATUSES = ['no_violation', 'violation', 'significant_violation'] as const;
export type ComplianceStatus = (typeof COMPLIANCE_STATUSES)[number];

/** ECHO enforcement action types. */
export const CASE_TYPES = ['administrative_informal', 'administrative_formal', 'judicial'] as const;
export type CaseType = (typeof CASE_TYPES)[number];

/** Case life cycle: filed → active → settled → closed. */
export const CASE_STATUSES = ['filed', 'active', 'settled', 'closed'] as const;
export type CaseStatus = (typeof CASE_STATUSES)[number];
