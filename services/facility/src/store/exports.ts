import type { CaseStatus, CaseType, Severity } from '../domain/codes';
import type { EnforcementCase, Facility, Violation } from '../domain/model';
import { FIELDS } from '../domain/records';
import { type FacilityFilter, facilityConditions, type Queryable } from './queries';
import {
  CASE_COLUMNS,
  CASE_FIELDS,
  type CaseRow,
  FACILITY_COLUMNS,
  FACILITY_FIELDS,
  type FacilityRow,
  toCase,
  toFacility,
  toViolation,
  VIOLATION_COLUMNS,
  VIOLATION_FIELDS,
  type ViolationRow,
} from './rows';

/**
 * Bulk export, one page at a time (docs/facility.md, "Bulk export"). Every kind is walked in
 * primary-key (`id`) order, so the resume point of an export is simply the id of the last row a
 * client received, whatever the format, and each page is one index range scan of at most `limit`
 * rows: memory is one page whatever the size of the export.
 */
export type ExportKind = 'facilities' | 'violations' | 'cases';

/** The filters of an export: the facility list's (facilities), and the violations' and cases' own. */
export interface ExportFilter extends FacilityFilter {
  facility_id?: string;
  severity?: Severity;
  status?: CaseStatus;
  case_type?: CaseType;
  since?: string;
}

export type ExportRow = Facility | Violation | EnforcementCase;

export interface ExportPage {
  rows: ExportRow[];
  /** More rows follow the last one. */
  more: boolean;
}

export async function exportPage(
  db: Queryable,
  kind: ExportKind,
  f: ExportFilter,
  after: string | undefined,
  limit: number,
): Promise<ExportPage> {
  const params: unknown[] = [];
  const where: string[] = [];
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  let sql: string;
  let map: (r: never) => ExportRow;
  if (kind === 'facilities') {
    where.push(...facilityConditions(f, p));
    if (after) where.push(`id > ${p(after)}::uuid`);
    sql = `SELECT ${FACILITY_COLUMNS} FROM facilities ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ${p(limit + 1)}`;
    map = (r: FacilityRow) => toFacility(r);
  } else if (kind === 'violations') {
    if (f.state) where.push(`f.state = ${p(f.state)}`);
    if (f.facility_id) where.push(`v.facility_id = ${p(f.facility_id)}`);
    if (f.program) where.push(`v.program = ${p(f.program)}`);
    if (f.severity) where.push(`v.severity = ${p(f.severity)}`);
    if (f.since) where.push(`v.violation_date >= ${p(f.since)}::date`);
    if (after) where.push(`v.id > ${p(after)}::uuid`);
    sql = `SELECT ${VIOLATION_COLUMNS}
             FROM violations v JOIN facilities f ON f.id = v.facility_id
             ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
            ORDER BY v.id LIMIT ${p(limit + 1)}`;
    map = (r: ViolationRow) => toViolation(r);
  } else {
    if (f.facility_id) where.push(`facility_ids @> ARRAY[${p(f.facility_id)}]::uuid[]`);
    if (f.status) where.push(`status = ${p(f.status)}`);
    if (f.case_type) where.push(`case_type = ${p(f.case_type)}`);
    if (f.since) where.push(`filed_date >= ${p(f.since)}::date`);
    if (after) where.push(`id > ${p(after)}::uuid`);
    sql = `SELECT ${CASE_COLUMNS} FROM cases ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ${p(limit + 1)}`;
    map = (r: CaseRow) => toCase(r);
  }
  const { rows } = await db.query(sql, params);
  const more = rows.length > limit;
  return { rows: (more ? rows.slice(0, limit) : rows).map((r) => map(r as never)), more };
}

/** CSV columns of each kind: the representation's fields, in its order; a group's as `group.sub` (as imports read them). */
export const CSV_COLUMNS: Record<ExportKind, readonly string[]> = {
  facilities: FACILITY_FIELDS.flatMap((f) => {
    const group = FIELDS.facilities.filter((c) => c.startsWith(`${f}.`));
    return group.length > 0 ? group : [f];
  }),
  violations: VIOLATION_FIELDS,
  cases: CASE_FIELDS,
};

/** RFC 4180: a field with a comma, quote, CR or LF is quoted, quotes doubled; arrays joined with `;`; null empty. */
function csvField(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = Array.isArray(v) ? v.join(';') : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csvLine(values: readonly unknown[]): string {
  return `${values.map(csvField).join(',')}\r\n`;
}

export function csvRow(kind: ExportKind, row: ExportRow): string {
  const r = row as unknown as Record<string, unknown>;
  return csvLine(CSV_COLUMNS[kind].map((c) => c.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown> | null)?.[k], r)));
}
