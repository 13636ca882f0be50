import type { FieldProblem } from '@fcd/service-kit';
import {
  CASE_STATUSES,
  CASE_TYPES,
  type CaseStatus,
  type CaseType,
  COMPLIANCE_STATUSES,
  type ComplianceStatus,
  normalizeState,
  PROGRAMS,
  type Program,
  SEVERITIES,
  type Severity,
} from './codes';

/**
 * Import records: one row of an import file or of the ingestion API, keyed by
 * its natural key (registry_id, source_id, case_number). A row is the full
 * state of the record at the source: optional fields left out become null.
 */
export interface FacilityRecord {
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
}

export interface ViolationRecord {
  source_id: string;
  /** The facility's registry_id. */
  registry_id: string;
  program: Program;
  violation_type: string;
  violation_date: string;
  severity: Severity;
  description: string | null;
  resolved_date: string | null;
}

export interface CaseRecord {
  case_number: string;
  case_type: CaseType;
  status: CaseStatus;
  lead_agency: string;
  filed_date: string;
  settled_date: string | null;
  /** Decimal string with two places, e.g. "12500.00". */
  penalty_amount_usd: string | null;
  /** registry_ids of the facilities involved (at least one). */
  registry_ids: string[];
}

export type RecordKind = 'facilities' | 'violations' | 'cases';
export const RECORD_KINDS: readonly RecordKind[] = ['facilities', 'violations', 'cases'];

export interface RecordOf {
  facilities: FacilityRecord;
  violations: ViolationRecord;
  cases: CaseRecord;
}

export type ParseResult<T> = { ok: true; record: T } | { ok: false; problems: FieldProblem[] };

export const FIELDS: Record<RecordKind, readonly string[]> = {
  facilities: [
    'registry_id',
    'name',
    'street',
    'city',
    'state',
    'zip',
    'county',
    'latitude',
    'longitude',
    'naics_codes',
    'programs',
    'compliance_status',
    'last_inspection_date',
  ],
  violations: ['source_id', 'registry_id', 'program', 'violation_type', 'violation_date', 'severity', 'description', 'resolved_date'],
  cases: ['case_number', 'case_type', 'status', 'lead_agency', 'filed_date', 'settled_date', 'penalty_amount_usd', 'registry_ids'],
};

export const NATURAL_KEY: { [K in RecordKind]: keyof RecordOf[K] & string } = {
  facilities: 'registry_id',
  violations: 'source_id',
  cases: 'case_number',
};

const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]*$/;
const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;
const ZIP_PATTERN = /^\d{5}(-\d{4})?$/;
const NAICS_PATTERN = /^\d{2,6}$/;
const MONEY_PATTERN = /^\d{1,12}(\.\d{1,2})?$/;
/** Separators accepted between list items given as one string (CSV cells). */
const LIST_SEPARATOR = /[\s;|,]+/;

/** True for a real calendar date written YYYY-MM-DD. */
export function isCalendarDate(value: string): boolean {
  const m = DATE_PATTERN.exec(value);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (y < 1900 || y > 2999 || mo < 1 || mo > 12 || d < 1) return false;
  return d <= new Date(Date.UTC(y, mo, 0)).getUTCDate();
}

/** Reads the fields of one raw row, collecting every problem. */
class RowReader {
  readonly problems: FieldProblem[] = [];

  constructor(
    private readonly raw: Record<string, unknown>,
    known: readonly string[],
  ) {
    for (const key of Object.keys(raw)) {
      if (!known.includes(key)) this.problem(key, 'is not a known field');
    }
  }

  problem(field: string, message: string): void {
    this.problems.push({ field, message });
  }

  /** A trimmed non-empty string, or null when absent or empty. */
  private text(field: string): string | null | undefined {
    const v = this.raw[field];
    if (v === undefined || v === null) return null;
    if (typeof v === 'number' && Number.isFinite(v)) return String(v);
    if (typeof v !== 'string') {
      this.problem(field, 'must be a string');
      return undefined;
    }
    const t = v.trim();
    return t === '' ? null : t;
  }

  optionalString(field: string, maxLength: number, pattern?: RegExp, patternMessage?: string): string | null {
    const t = this.text(field);
    if (t === undefined || t === null) return null;
    if (t.length > maxLength) {
      this.problem(field, `must be at most ${maxLength} characters`);
      return null;
    }
    if (pattern && !pattern.test(t)) {
      this.problem(field, patternMessage ?? 'is malformed');
      return null;
    }
    return t;
  }

  requiredString(field: string, maxLength: number, pattern?: RegExp, patternMessage?: string): string {
    if (this.isBlank(field)) {
      this.problem(field, 'is required');
      return '';
    }
    return this.optionalString(field, maxLength, pattern, patternMessage) ?? '';
  }

  private isBlank(field: string): boolean {
    const v = this.raw[field];
    return v === undefined || v === null || (typeof v === 'string' && v.trim() === '');
  }

  oneOf<T extends string>(field: string, allowed: readonly T[], required: true): T;
  oneOf<T extends string>(field: string, allowed: readonly T[], required: false): T | null;
  oneOf<T extends string>(field: string, allowed: readonly T[], required: boolean): T | null {
    if (this.isBlank(field)) {
      if (required) this.problem(field, 'is required');
      return null;
    }
    const t = this.text(field);
    if (t === undefined || t === null) return null;
    const found = allowed.find((a) => a === t || a === t.toLowerCase() || a === t.toUpperCase());
    if (!found) {
      this.problem(field, `must be one of ${allowed.join(', ')}`);
      return null;
    }
    return found;
  }

  date(field: string, required: boolean): string | null {
    if (this.isBlank(field)) {
      if (required) this.problem(field, 'is required');
      return null;
    }
    const t = this.text(field);
    if (t === undefined || t === null) return null;
    if (!isCalendarDate(t)) {
      this.problem(field, 'must be a date YYYY-MM-DD');
      return null;
    }
    return t;
  }

  number(field: string, min: number, max: number): number | null {
    const v = this.raw[field];
    if (v === undefined || v === null || (typeof v === 'string' && v.trim() === '')) return null;
    const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v.trim()) : Number.NaN;
    if (!Number.isFinite(n) || n < min || n > max) {
      this.problem(field, `must be a number from ${min} to ${max}`);
      return null;
    }
    return n;
  }

  /** A list given as a JSON array of strings or as one string of items separated by ; | , or spaces. */
  list(field: string): string[] | undefined {
    const v = this.raw[field];
    if (v === undefined || v === null) return [];
    let items: unknown[];
    if (Array.isArray(v)) items = v;
    else if (typeof v === 'string') items = v.split(LIST_SEPARATOR);
    else {
      this.problem(field, 'must be a list of strings');
      return undefined;
    }
    const out: string[] = [];
    for (const item of items) {
      if (typeof item !== 'string' && typeof item !== 'number') {
        this.problem(field, 'must be a list of strings');
        return undefined;
      }
      const t = String(item).trim();
      if (t !== '' && !out.includes(t)) out.push(t);
    }
    return out;
  }

  money(field: string): string | null {
    const v = this.raw[field];
    if (v === undefined || v === null || (typeof v === 'string' && v.trim() === '')) return null;
    const s = typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v.toFixed(2) : typeof v === 'string' ? v.trim() : '';
    if (!MONEY_PATTERN.test(s)) {
      this.problem(field, 'must be a non-negative amount in dollars with at most 2 decimals');
      return null;
    }
    const [whole, frac = ''] = s.split('.');
    return `${BigInt(whole ?? '0').toString()}.${frac.padEnd(2, '0')}`;
  }
}

export function parseFacility(raw: Record<string, unknown>): ParseResult<FacilityRecord> {
  const r = new RowReader(raw, FIELDS.facilities);
  const registry_id = r.requiredString('registry_id', 40, KEY_PATTERN, 'must be letters, digits and . _ : / -');
  const name = r.requiredString('name', 200);
  const street = r.optionalString('street', 200);
  const city = r.optionalString('city', 100);
  let state = '';
  const rawState = r.requiredString('state', 2);
  if (rawState) {
    const s = normalizeState(rawState);
    if (s) state = s;
    else r.problem('state', 'must be a USPS state code');
  }
  const zip = r.optionalString('zip', 10, ZIP_PATTERN, 'must be a ZIP code (12345 or 12345-6789)');
  const county = r.optionalString('county', 100);
  const latitude = r.number('latitude', -90, 90);
  const longitude = r.number('longitude', -180, 180);
  const naics = r.list('naics_codes') ?? [];
  if (naics.some((c) => !NAICS_PATTERN.test(c))) r.problem('naics_codes', 'must be NAICS codes of 2 to 6 digits');
  const programsRaw = r.list('programs') ?? [];
  const programs: Program[] = [];
  for (const p of programsRaw) {
    const found = PROGRAMS.find((x) => x === p.toUpperCase());
    if (!found) {
      r.problem('programs', `must each be one of ${PROGRAMS.join(', ')}`);
      break;
    }
    if (!programs.includes(found)) programs.push(found);
  }
  const compliance_status = r.oneOf('compliance_status', COMPLIANCE_STATUSES, true);
  const last_inspection_date = r.date('last_inspection_date', false);
  if (r.problems.length > 0) return { ok: false, problems: r.problems };
  return {
    ok: true,
    record: {
      registry_id,
      name,
      street,
      city,
      state,
      zip,
      county,
      latitude,
      longitude,
      naics_codes: [...naics].sort(),
      programs: [...programs].sort(),
      compliance_status,
      last_inspection_date,
    },
  };
}

export function parseViolation(raw: Record<string, unknown>): ParseResult<ViolationRecord> {
  const r = new RowReader(raw, FIELDS.violations);
  const source_id = r.requiredString('source_id', 100, KEY_PATTERN, 'must be letters, digits and . _ : / -');
  const registry_id = r.requiredString('registry_id', 40, KEY_PATTERN, 'must be letters, digits and . _ : / -');
  const program = r.oneOf('program', PROGRAMS, true);
  const violation_type = r.requiredString('violation_type', 200);
  const violation_date = r.date('violation_date', true);
  const severity = r.oneOf('severity', SEVERITIES, true);
  const description = r.optionalString('description', 2000);
  const resolved_date = r.date('resolved_date', false);
  if (violation_date && resolved_date && resolved_date < violation_date) {
    r.problem('resolved_date', 'must not be before violation_date');
  }
  if (r.problems.length > 0) return { ok: false, problems: r.problems };
  return {
    ok: true,
    record: {
      source_id,
      registry_id,
      program,
      violation_type,
      violation_date: violation_date as string,
      severity,
      description,
      resolved_date,
    },
  };
}

export function parseCase(raw: Record<string, unknown>): ParseResult<CaseRecord> {
  const r = new RowReader(raw, FIELDS.cases);
  const case_number = r.requiredString('case_number', 60, KEY_PATTERN, 'must be letters, digits and . _ : / -');
  const case_type = r.oneOf('case_type', CASE_TYPES, true);
  const status = r.oneOf('status', CASE_STATUSES, true);
  const lead_agency = r.requiredString('lead_agency', 100);
  const filed_date = r.date('filed_date', true);
  const settled_date = r.date('settled_date', false);
  if (filed_date && settled_date && settled_date < filed_date) r.problem('settled_date', 'must not be before filed_date');
  const penalty_amount_usd = r.money('penalty_amount_usd');
  const registry_ids = r.list('registry_ids');
  if (registry_ids !== undefined) {
    if (registry_ids.length === 0) r.problem('registry_ids', 'must list at least one facility registry_id');
    else if (registry_ids.length > 100) r.problem('registry_ids', 'must list at most 100 facilities');
    else if (registry_ids.some((id) => id.length > 40 || !KEY_PATTERN.test(id))) r.problem('registry_ids', 'must be registry ids');
  }
  if (r.problems.length > 0) return { ok: false, problems: r.problems };
  return {
    ok: true,
    record: {
      case_number,
      case_type,
      status,
      lead_agency,
      filed_date: filed_date as string,
      settled_date,
      penalty_amount_usd,
      registry_ids: [...(registry_ids ?? [])].sort(),
    },
  };
}

export const PARSERS: { [K in RecordKind]: (raw: Record<string, unknown>) => ParseResult<RecordOf[K]> } = {
  facilities: parseFacility,
  violations: parseViolation,
  cases: parseCase,
};
