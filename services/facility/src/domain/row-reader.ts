import type { FieldProblem } from '@fcd/service-kit/pure';

/**
 * Reading the fields of one raw import row (a CSV line or a JSON object): every field is read,
 * every problem collected, so a rejected row names all of its problems at once.
 */

const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;
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
export class RowReader {
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

  /** A whole number from 0 (a count); empty is 0. */
  count(field: string): number {
    const n = this.number(field, 0, 2_147_483_647);
    if (n !== null && !Number.isInteger(n)) {
      this.problem(field, 'must be a whole number');
      return 0;
    }
    return n ?? 0;
  }

  /** A yes/no flag: a boolean, or true/false/Y/N in any case; empty is false. */
  flag(field: string): boolean {
    const v = this.raw[field];
    if (typeof v === 'boolean') return v;
    if (this.isBlank(field)) return false;
    const t = typeof v === 'string' ? v.trim().toLowerCase() : '';
    if (t === 'true' || t === 'y') return true;
    if (t === 'false' || t === 'n') return false;
    this.problem(field, 'must be true or false');
    return false;
  }

  /**
   * The sub-fields of a group as `field.sub` → value: from an object under `field` (JSON) and
   * from `field.sub` columns (CSV).
   */
  nested(field: string, subs: readonly string[]): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const v = this.raw[field];
    if (v !== undefined && v !== null) {
      if (typeof v === 'object' && !Array.isArray(v)) {
        for (const [k, x] of Object.entries(v)) out[`${field}.${k}`] = x;
      } else this.problem(field, 'must be an object');
    }
    for (const s of subs) if (`${field}.${s}` in this.raw) out[`${field}.${s}`] = this.raw[`${field}.${s}`];
    return out;
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
