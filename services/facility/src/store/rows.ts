import type { Static, TObject } from '@sinclair/typebox';
import { fieldNames } from '../domain/fields';
import { CaseSchema, type EnforcementCase, type Facility, FacilitySchema, type Violation, ViolationSchema } from '../domain/model';

/**
 * Column lists and row → representation mappers shared by the read and write SQL, all derived
 * from the representations' schemas (domain/model.ts): a field added there is selected and
 * mapped here without a change.
 */

/** A representation as Postgres returns it: timestamps (`updated_at`, `data_as_of`) are Dates. */
type RowOf<V> = { [K in keyof V]: K extends 'updated_at' | 'data_as_of' ? Date : V[K] };

/**
 * The mapper of a representation: its fields in its order; date-time fields from Date to ISO
 * 8601; a group (a jsonb object, whose keys Postgres reorders) with its keys in its schema's order.
 *
 * Compiled once per representation into one object literal (`new Function`, as fast-json-stringify
 * and ajv compile schemas): every row then gets an object of one shape in a single allocation.
 * A loop storing `out[field]` by a varying key made V8 add the properties one at a time through
 * its generic keyed store: 1.8 µs a facility against 0.9 (docs/benchmarks/history/2026-11-29.md).
 * The names in the code are the schema's own, each written as a JSON string literal.
 */
function rowMapper<S extends TObject>(schema: S): (row: RowOf<Static<S>>) => Static<S> {
  const name = (key: string) => JSON.stringify(key);
  const value = (field: string) => {
    const p = schema.properties[field] as TObject & { format?: string };
    const column = `row[${name(field)}]`;
    if (p.format === 'date-time') return `${column}.toISOString()`;
    if (p.type !== 'object') return column;
    return `{ ${fieldNames(p)
      .map((k) => `${name(k)}: ${column}[${name(k)}]`)
      .join(', ')} }`;
  };
  const literal = fieldNames(schema)
    .map((f) => `${name(f)}: ${value(f)}`)
    .join(', ');
  return new Function('row', `return { ${literal} };`) as (row: RowOf<Static<S>>) => Static<S>;
}

/** A facility's columns, in the representation's order: its id, the import fields (domain/records.ts), updated_at. */
export const FACILITY_FIELDS: readonly string[] = fieldNames(FacilitySchema);
export const FACILITY_COLUMNS = FACILITY_FIELDS.join(', ');

export const CASE_FIELDS: readonly string[] = fieldNames(CaseSchema);
export const CASE_COLUMNS = CASE_FIELDS.join(', ');

export const VIOLATION_FIELDS: readonly string[] = fieldNames(ViolationSchema);
/** A violation's columns from `violations v JOIN facilities f ON f.id = v.facility_id`. */
export const VIOLATION_COLUMNS = VIOLATION_FIELDS.map((c) => (c === 'facility_name' ? 'f.name AS facility_name' : `v.${c}`)).join(', ');

export type FacilityRow = RowOf<Facility>;
export type ViolationRow = RowOf<Violation>;
export type CaseRow = RowOf<EnforcementCase>;

export const toFacility: (r: FacilityRow) => Facility = rowMapper(FacilitySchema);
export const toViolation: (r: ViolationRow) => Violation = rowMapper(ViolationSchema);
export const toCase: (r: CaseRow) => EnforcementCase = rowMapper(CaseSchema);
