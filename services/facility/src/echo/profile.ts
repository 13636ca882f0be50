import { cell, echoDate, echoNumber, idList, RowReason } from './codes';

/**
 * The compliance profile of a facility from ECHO_EXPORTER.csv's FAC_* summary columns (and the
 * CAA_/CWA_/RCRA_COMPLIANCE_STATUS texts): one staging cell per profile field, the groups as
 * JSON. Empty cells are null, or 0 for counts, or false for flags. docs/echo.md lists the mapping.
 */

type Get = (column: string) => string | undefined;

/** The profile's staging columns (after the facility's own, before `links`). */
export const PROFILE_STAGE =
  'epa_region text, sic_codes text, major boolean, program_status jsonb, compliance jsonb, inspections jsonb, enforcement jsonb, penalties jsonb';

/** The columns the profile reads. */
export const PROFILE_READS = [
  'FAC_EPA_REGION',
  'FAC_SIC_CODES',
  'FAC_MAJOR_FLAG',
  'FAC_QTRS_WITH_NC',
  'FAC_PROGRAMS_WITH_SNC',
  'FAC_SNC_FLG',
  'FAC_INSPECTION_COUNT',
  'FAC_DATE_LAST_INSPECTION',
  'FAC_INFORMAL_COUNT',
  'FAC_FORMAL_ACTION_COUNT',
  'FAC_DATE_LAST_FORMAL_ACTION',
  'FAC_PENALTY_COUNT',
  'FAC_TOTAL_PENALTIES',
  'FAC_LAST_PENALTY_AMT',
  'FAC_DATE_LAST_PENALTY',
  'CAA_COMPLIANCE_STATUS',
  'CWA_COMPLIANCE_STATUS',
  'RCRA_COMPLIANCE_STATUS',
];

/** FAC_EPA_REGION: 1 to 10, written with two digits ("06"); null when empty. */
function epaRegion(value: string | undefined): string | null {
  const v = cell(value);
  if (v === undefined) return null;
  const n = /^\d{1,2}$/.test(v) ? Number(v) : 0;
  if (n < 1 || n > 10) throw new RowReason(`FAC_EPA_REGION: not an EPA region: '${v}'`);
  return String(n).padStart(2, '0');
}

/** A count column: a whole number from 0; 0 when empty. */
function echoCount(get: Get, column: string): number {
  const v = echoNumber(get(column), column, { min: 0 });
  if (v === undefined) return 0;
  if (!/^\d+(\.0+)?$/.test(v)) throw new RowReason(`${column}: not a whole number: '${v}'`);
  return Number(v);
}

/** An amount column: US dollars as a number; null when empty. */
function echoUsd(get: Get, column: string): number | null {
  const v = echoNumber(get(column), column, { min: 0 });
  return v === undefined ? null : Number(v);
}

/** A Y/N flag column: true for Y; false when N or empty. */
function echoFlag(get: Get, column: string): boolean {
  const v = cell(get(column));
  if (v === undefined || v === 'N') return false;
  if (v === 'Y') return true;
  throw new RowReason(`${column}: not Y or N: '${v}'`);
}

const date = (get: Get, column: string): string | null => echoDate(get(column), column) ?? null;

/** The profile's staging cells, in PROFILE_STAGE's order; throws RowReason. */
export function profileCells(get: Get): Array<string | null> {
  return [
    epaRegion(get('FAC_EPA_REGION')),
    idList(get('FAC_SIC_CODES')).sort().join(' '),
    echoFlag(get, 'FAC_MAJOR_FLAG') ? 't' : 'f',
    JSON.stringify({
      caa: cell(get('CAA_COMPLIANCE_STATUS')) ?? null,
      cwa: cell(get('CWA_COMPLIANCE_STATUS')) ?? null,
      rcra: cell(get('RCRA_COMPLIANCE_STATUS')) ?? null,
    }),
    JSON.stringify({
      quarters_with_noncompliance: echoCount(get, 'FAC_QTRS_WITH_NC'),
      programs_with_snc: echoCount(get, 'FAC_PROGRAMS_WITH_SNC'),
      snc: echoFlag(get, 'FAC_SNC_FLG'),
    }),
    JSON.stringify({ count: echoCount(get, 'FAC_INSPECTION_COUNT'), last_date: date(get, 'FAC_DATE_LAST_INSPECTION') }),
    JSON.stringify({
      informal_actions: echoCount(get, 'FAC_INFORMAL_COUNT'),
      formal_actions: echoCount(get, 'FAC_FORMAL_ACTION_COUNT'),
      last_formal_action_date: date(get, 'FAC_DATE_LAST_FORMAL_ACTION'),
    }),
    JSON.stringify({
      count: echoCount(get, 'FAC_PENALTY_COUNT'),
      total_usd: echoUsd(get, 'FAC_TOTAL_PENALTIES'),
      last_amount_usd: echoUsd(get, 'FAC_LAST_PENALTY_AMT'),
      last_date: date(get, 'FAC_DATE_LAST_PENALTY'),
    }),
  ];
}

/** What a new facility from FRS (which carries no profile) starts with: the columns' defaults. */
export const PROFILE_DEFAULTS: Record<string, string> = {
  epa_region: 'NULL::text',
  sic_codes: "'{}'::text[]",
  major: 'false',
  program_status: `'{"caa": null, "cwa": null, "rcra": null}'::jsonb`,
  compliance: `'{"quarters_with_noncompliance": 0, "programs_with_snc": 0, "snc": false}'::jsonb`,
  inspections: `'{"count": 0, "last_date": null}'::jsonb`,
  enforcement: `'{"informal_actions": 0, "formal_actions": 0, "last_formal_action_date": null}'::jsonb`,
  penalties: `'{"count": 0, "total_usd": null, "last_amount_usd": null, "last_date": null}'::jsonb`,
};
