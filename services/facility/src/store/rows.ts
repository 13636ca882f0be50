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
 */
function rowMapper<S extends TObject>(schema: S): (row: RowOf<Static<S>>) => Static<S> {
  const fields = fieldNames(schema);
  // What each field needs, decided once: copied, a Date made ISO 8601, or a group's keys put in
  // order. Parallel arrays and plain loops: a read maps every row, so the mapper allocates only
  // the objects it returns (no label lookups, no [key, value] pairs).
  const kinds: Array<'copy' | 'timestamp' | readonly string[]> = fields.map((f) => {
    const p = schema.properties[f] as TObject & { format?: string };
    if (p.format === 'date-time') return 'timestamp';
    return p.type === 'object' ? fieldNames(p) : 'copy';
  });
  return (row) => {
    const r = row as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (let i = 0; i < fields.length; i++) {
      const f = fields[i] as string;
      const kind = kinds[i];
      const v = r[f];
      if (kind === 'copy') out[f] = v;
      else if (kind === 'timestamp') out[f] = (v as Date).toISOString();
      else {
        const group = v as Record<string, unknown>;
        const ordered: Record<string, unknown> = {};
        for (const k of kind as readonly string[]) ordered[k] = group[k];
        out[f] = ordered;
      }
    }
    return out as Static<S>;
  };
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
