import { redactSecret } from './secrets';

/**
 * A resource's fields, declared once: each field's SQL column, how the row's value becomes the
 * record's, and whether the public view shows it. The column list, the row → record mapping and
 * the record → view mapping (and the view's type, `ViewOf`) all derive from it.
 */
export interface FieldSpec {
  /**
   * The select expression, when not the field's own column (e.g. `secret_last4 AS secret`); a
   * field made of several columns lists them all (its `read` takes them from the row).
   */
  sql?: string;
  /** The row's value (and the whole row, for a field of several columns) → the record's; the value as it is when absent. */
  read?: (value: never, row: Record<string, unknown>) => unknown;
  /** Shown in the public view. */
  view: boolean;
}

export type FieldSpecs<R> = { readonly [K in keyof R]-?: FieldSpec };

/** The names of the fields a declaration shows (those declared `view: true`). */
export type ViewKey<F> = { [K in keyof F]: F[K] extends { view: true } ? K : never }[keyof F];

/** A record's public view, as the declaration `F` of its fields says (declared with `satisfies FieldSpecs<R>`). */
export type ViewOf<R, F> = Pick<R, ViewKey<F> & keyof R>;

/** The select list of the fields, in their order. */
export function columnsOf<R>(fields: FieldSpecs<R>): string {
  return Object.entries<FieldSpec>(fields)
    .map(([name, f]) => f.sql ?? name)
    .join(', ');
}

/** The row (as selected by `columnsOf`) → the record. */
export function recordOf<R>(fields: FieldSpecs<R>, row: Record<string, unknown>): R {
  return Object.fromEntries(
    Object.entries<FieldSpec>(fields).map(([name, f]) => [
      name,
      f.read ? (f.read as (v: unknown, r: Record<string, unknown>) => unknown)(row[name], row) : row[name],
    ]),
  ) as R;
}

/** The names of the fields the view shows. */
export function viewNames<F extends { readonly [name: string]: FieldSpec }>(fields: F): Array<ViewKey<F>> {
  return Object.entries<FieldSpec>(fields)
    .filter(([, f]) => f.view)
    .map(([name]) => name as ViewKey<F>);
}

/** The record → its public view (the fields it shows, in their order). */
export function viewOf<R, K extends keyof R>(names: readonly K[], record: R): Pick<R, K> {
  return Object.fromEntries(names.map((name) => [name, record[name]])) as Pick<R, K>;
}

export const isoTime = (value: Date) => value.toISOString();
export const isoTimeOrNull = (value: Date | null) => (value === null ? null : value.toISOString());
export const redacted = (last4: string) => redactSecret(last4);
