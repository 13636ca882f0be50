import { type FieldProblem, Nullable, StringEnum } from '@fcd/service-kit/pure';
import { type Static, type TArray, type TObject, type TSchema, type TString, Type } from '@sinclair/typebox';
import { normalizeState } from './codes';
import { RowReader } from './row-reader';

/**
 * The kinds of field a resource is made of. A field says once what it is: its schema in the
 * public representation (OpenAPI, events), its Postgres type, and how an import row is read into
 * it. A resource (domain/records.ts) is an ordered object of fields; its record type, its import
 * header, its representation (domain/model.ts), its SQL columns and its row mapping
 * (store/rows.ts) all derive from that object.
 */
export interface Field<S extends TSchema = TSchema> {
  /** The field in the representation. */
  schema: S;
  /** Its Postgres type (the import's `jsonb_to_recordset` column). */
  sql: string;
  /** Reads it from a raw row (problems go to the reader); `before` holds the fields read before it. */
  read: (r: RowReader, name: string, before: Record<string, unknown>) => Static<S>;
  /** Its columns in a CSV import or export, when not just its name (a group's `name.sub`). */
  columns?: (name: string) => string[];
}

export type Fields = Record<string, Field>;

/** The value of each field: a resource's import record. */
export type ValuesOf<F extends Fields> = { [K in keyof F]: Static<F[K]['schema']> };

/** The representation's schema of the fields (for a view: spread with its own fields around them). */
export function schemasOf<F extends Fields>(fields: F): { [K in keyof F]: F[K]['schema'] } {
  return Object.fromEntries(Object.entries(fields).map(([name, f]) => [name, f.schema])) as { [K in keyof F]: F[K]['schema'] };
}

/** The import (and CSV) columns of the fields, in their order: a group's sub-fields as `name.sub`. */
export function importColumns(fields: Fields): string[] {
  return Object.entries(fields).flatMap(([name, f]) => f.columns?.(name) ?? [name]);
}

/** The names of an object schema's fields, in its order. */
export function fieldNames(schema: TObject): string[] {
  return Object.keys(schema.properties);
}

export type ParseResult<T> = { ok: true; record: T } | { ok: false; problems: FieldProblem[] };

/** Reads a raw row into the fields' record, in their order, collecting every problem. */
export function parseFields<F extends Fields>(fields: F, raw: Record<string, unknown>): ParseResult<ValuesOf<F>> {
  const r = new RowReader(raw, [...Object.keys(fields), ...importColumns(fields)]);
  const record: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(fields)) record[name] = f.read(r, name, record);
  if (r.problems.length > 0) return { ok: false, problems: r.problems };
  return { ok: true, record: record as ValuesOf<F> };
}

export const Uuid = Type.String({ format: 'uuid' });
export const DateString = Type.String({ format: 'date', description: 'YYYY-MM-DD' });
export const Timestamp = Type.String({ format: 'date-time' });

const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]*$/;
const KEY_MESSAGE = 'must be letters, digits and . _ : / -';

/** A natural key (registry_id, source_id, case_number): required, letters, digits and . _ : / -. */
export function key(maxLength: number): Field<TString> {
  return { schema: Type.String(), sql: 'text', read: (r, n) => r.requiredString(n, maxLength, KEY_PATTERN, KEY_MESSAGE) };
}

/** Required text, trimmed. */
export function text(maxLength: number): Field<TString> {
  return { schema: Type.String(), sql: 'text', read: (r, n) => r.requiredString(n, maxLength) };
}

/** Optional text, trimmed (empty is null); with a pattern, what else it refuses and why. */
export function optionalText(maxLength: number, pattern?: RegExp, message?: string) {
  const schema = Nullable(Type.String());
  return { schema, sql: 'text', read: (r, n) => r.optionalString(n, maxLength, pattern, message) } satisfies Field<typeof schema>;
}

/** A USPS state code, upper-cased. */
export function stateCode(): Field<TString> {
  return {
    schema: Type.String(),
    sql: 'text',
    read: (r, n) => {
      const raw = r.requiredString(n, 2);
      if (!raw) return '';
      const state = normalizeState(raw);
      if (!state) r.problem(n, 'must be a USPS state code');
      return state ?? '';
    },
  };
}

/** An optional number in [min, max]. */
export function optionalNumber(min: number, max: number) {
  const schema = Nullable(Type.Number());
  return { schema, sql: 'float8', read: (r, n) => r.number(n, min, max) } satisfies Field<typeof schema>;
}

/** One of the codes (any case), required. */
export function oneOf<T extends readonly string[]>(values: T) {
  const schema = StringEnum(values);
  return { schema, sql: 'text', read: (r, n) => r.oneOf(n, values, true) } satisfies Field<typeof schema>;
}

/** A list of codes matching a pattern, de-duplicated and sorted. */
export function codeList(pattern: RegExp, message: string) {
  const schema = Type.Array(Type.String());
  const read = (r: RowReader, n: string) => {
    const items = r.list(n) ?? [];
    if (items.some((c) => !pattern.test(c))) r.problem(n, message);
    return [...items].sort();
  };
  return { schema, sql: 'text[]', read } satisfies Field<typeof schema>;
}

/** A list of codes out of `values` (any case), de-duplicated and sorted. */
export function enumList<T extends readonly string[]>(values: T) {
  const schema = Type.Array(StringEnum(values));
  const read = (r: RowReader, n: string) => {
    const out: T[number][] = [];
    for (const item of r.list(n) ?? []) {
      const found = values.find((v) => v === item.toUpperCase());
      if (!found) {
        r.problem(n, `must each be one of ${values.join(', ')}`);
        break;
      }
      if (!out.includes(found)) out.push(found);
    }
    return out.sort();
  };
  return { schema, sql: 'text[]', read } satisfies Field<typeof schema>;
}

/** A required calendar date. */
export function date(): Field<typeof DateString> {
  return { schema: DateString, sql: 'date', read: (r, n) => r.date(n, true) as string };
}

/** An optional calendar date; with `notBefore`, never before that (earlier) date field. */
export function optionalDate(notBefore?: string) {
  const schema = Nullable(DateString);
  const read = (r: RowReader, n: string, before: Record<string, unknown>) => {
    const value = r.date(n, false);
    const floor = notBefore === undefined ? null : before[notBefore];
    if (value && typeof floor === 'string' && floor && value < floor) r.problem(n, `must not be before ${notBefore}`);
    return value;
  };
  return { schema, sql: 'date', read } satisfies Field<typeof schema>;
}

/** An optional amount in dollars: a decimal string with two places, e.g. "12500.00". */
export function money() {
  const schema = Nullable(Type.String({ description: 'Decimal string, e.g. "12500.00"' }));
  return { schema, sql: 'numeric', read: (r, n) => r.money(n) } satisfies Field<typeof schema>;
}

/** registry_ids of the facilities involved (1 to 100), de-duplicated and sorted. */
export function registryIds(): Field<TArray<TString>> {
  return {
    schema: Type.Array(Type.String()),
    sql: 'text[]',
    read: (r, n) => {
      const ids = r.list(n);
      if (ids !== undefined) {
        if (ids.length === 0) r.problem(n, 'must list at least one facility registry_id');
        else if (ids.length > 100) r.problem(n, 'must list at most 100 facilities');
        else if (ids.some((id) => id.length > 40 || !KEY_PATTERN.test(id))) r.problem(n, 'must be registry ids');
      }
      return [...(ids ?? [])].sort();
    },
  };
}

/** A count: a whole number from 0; empty is 0. */
export function count() {
  const schema = Type.Integer({ minimum: 0 });
  return { schema, sql: 'int4', read: (r, n) => r.count(n) } satisfies Field<typeof schema>;
}

/** An optional amount of US dollars as a number (cents allowed). */
export function optionalUsd() {
  const schema = Nullable(Type.Number({ minimum: 0 }));
  return { schema, sql: 'float8', read: (r, n) => r.number(n, 0, 1e13) } satisfies Field<typeof schema>;
}

/** A yes/no flag: true/false, Y/N; empty is false. */
export function flag() {
  const schema = Type.Boolean();
  return { schema, sql: 'boolean', read: (r, n) => r.flag(n) } satisfies Field<typeof schema>;
}

/**
 * A group of fields, one object in the representation and one jsonb column. An import row gives
 * it as an object (JSON) or as one column per sub-field named `name.sub` (CSV); problems name
 * the sub-field as `name.sub`.
 */
export function group<F extends Fields>(sub: F) {
  const schema = Type.Object(schemasOf(sub));
  const names = Object.keys(sub);
  const read = (r: RowReader, n: string) => {
    const child = new RowReader(
      r.nested(n, names),
      names.map((s) => `${n}.${s}`),
    );
    const out: Record<string, unknown> = {};
    for (const [s, f] of Object.entries(sub)) out[s] = f.read(child, `${n}.${s}`, out);
    for (const p of child.problems) r.problem(p.field, p.message);
    return out as Static<typeof schema>;
  };
  return { schema, sql: 'jsonb', read, columns: (n: string) => names.map((s) => `${n}.${s}`) } satisfies Field<typeof schema>;
}
