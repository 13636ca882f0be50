import type { CaseStatus, CaseType, ComplianceStatus, Program, Severity } from '../domain/codes';

/**
 * Code mappings from ECHO download values to the API's vocabularies. Every mapping is listed,
 * with its source, in docs/echo.md; a value not listed here is a row error, never a guess.
 */

/** A cell with Oracle blank padding removed; undefined when empty (ECHO writes no NULL/NA). */
export function cell(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const t = value.trim();
  return t === '' ? undefined : t;
}

const DATE = /^(\d{2})[/-](\d{2})[/-](\d{4})$/;

/**
 * ECHO dates: MM/DD/YYYY (most files) or MM-DD-YYYY (ICIS-AIR_VIOLATION_HISTORY), to ISO
 * YYYY-MM-DD. Undefined for an empty cell; throws a row reason for anything else.
 */
export function echoDate(value: string | undefined, column: string): string | undefined {
  const v = cell(value);
  if (v === undefined) return undefined;
  const m = DATE.exec(v);
  if (m) {
    const [, mm, dd, yyyy] = m as unknown as [string, string, string, string];
    const d = new Date(Date.UTC(Number(yyyy), Number(mm) - 1, Number(dd)));
    if (d.getUTCFullYear() === Number(yyyy) && d.getUTCMonth() === Number(mm) - 1 && d.getUTCDate() === Number(dd)) {
      return `${yyyy}-${mm}-${dd}`;
    }
  }
  throw new RowReason(`${column}: not a date (MM/DD/YYYY): '${v}'`);
}

/** A row-level problem: the reason is reported as file:line: reason and the row is skipped. */
export class RowReason extends Error {}

/** A decimal number (coordinates, amounts); undefined when empty. */
export function echoNumber(value: string | undefined, column: string, opts: { min?: number; max?: number } = {}): string | undefined {
  const v = cell(value);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (
    !/^-?\d+(\.\d+)?$/.test(v) ||
    !Number.isFinite(n) ||
    (opts.min !== undefined && n < opts.min) ||
    (opts.max !== undefined && n > opts.max)
  ) {
    throw new RowReason(`${column}: not a valid number: '${v}'`);
  }
  return v;
}

/** ECHO_EXPORTER.FAC_COMPLIANCE_STATUS → compliance_status. */
const COMPLIANCE_STATUS: Record<string, ComplianceStatus> = {
  'No Violation Identified': 'no_violation',
  'Violation Identified': 'violation',
  Violation: 'violation',
  'Significant Violation': 'significant_violation',
  'High Priority Violation': 'significant_violation',
  // ECHO shows no current violation for these; the API's vocabulary has no "inactive"/"unknown".
  Inactive: 'no_violation',
  Unknown: 'no_violation',
};

export function complianceStatus(value: string | undefined): ComplianceStatus {
  const v = cell(value);
  if (v === undefined) return 'no_violation';
  const s = COMPLIANCE_STATUS[v];
  if (!s) throw new RowReason(`FAC_COMPLIANCE_STATUS: unknown value '${v}'`);
  return s;
}

/** ECHO_EXPORTER program flags → programs. */
export const PROGRAM_FLAGS: ReadonlyArray<readonly [string, Program]> = [
  ['AIR_FLAG', 'CAA'],
  ['NPDES_FLAG', 'CWA'],
  ['RCRA_FLAG', 'RCRA'],
  ['SDWIS_FLAG', 'SDWA'],
];

/** ICIS-AIR_VIOLATION_HISTORY.ENF_RESPONSE_POLICY_CODE → severity. */
export const AIR_SEVERITY: Record<string, Severity> = { HPV: 'significant', FRV: 'moderate' };

/** CASE_ENFORCEMENTS.ACTIVITY_TYPE_CODE → case_type (the download holds only these two). */
export const CASE_TYPE: Record<string, CaseType> = { AFR: 'administrative_formal', JDC: 'judicial' };

/**
 * CASE_ENFORCEMENTS.ACTIVITY_STATUS_CODE → status. CLS Closed; FOI Final Order Issued = settled.
 * Any other code is a case still in progress: active.
 */
export function caseStatus(code: string | undefined): CaseStatus {
  const v = cell(code);
  if (v === undefined) throw new RowReason('ACTIVITY_STATUS_CODE: empty');
  if (v === 'CLS') return 'closed';
  if (v === 'FOI') return 'settled';
  return 'active';
}

/** NPDES RNC resolution codes that mean the violation was resolved (1 and A are unresolved). */
export const NPDES_RESOLVED_CODES = new Set(['2', '3', '4', '5', '6', '7', '8', '9', 'B']);

/** Space-delimited id lists of ECHO_EXPORTER (AIR_IDS, NPDES_IDS, RCRA_IDS, FAC_NAICS_CODES). */
export function idList(value: string | undefined): string[] {
  const v = cell(value);
  return v === undefined ? [] : [...new Set(v.split(/\s+/).filter((s) => s !== ''))];
}
