import type { Fields } from '../domain/fields';

/** The `[name, Postgres type]` of each field (domain/fields.ts). */
export function sqlColumns(fields: Fields): Array<[string, string]> {
  return Object.entries(fields).map(([name, f]) => [name, f.sql]);
}

export interface UpsertSpec {
  table: string;
  /** The table's alias inside the statement. */
  alias: string;
  /** The natural key (the conflict target), among `columns`. */
  key: string;
  /** Every column of an incoming row (`[name, Postgres type]`), as `jsonb_to_recordset` reads it. */
  columns: Array<[string, string]>;
  /** What the statement returns of each row it wrote (from `alias`). */
  returning: string;
  /** A column whose stored value before the write is returned as `previous_status`. */
  previous?: string;
  /** More columns set, like `updated_at`, to the transaction's timestamp when a row is written. */
  stamps?: string[];
  /** More of the result: a join after `up` and what it selects. */
  join?: { from: string; select: string };
}

/**
 * The condition, in the upsert's result (`join.select` may use it), that a row was inserted, not
 * updated: no stored row had its key before the statement.
 */
export function insertedRow(key: string): string {
  return `old.${key} IS NULL`;
}

/**
 * One batched upsert: `$1` is a JSON array of rows (each with a `new_id`), `$2` the transaction's
 * timestamp (`updated_at`). A row that changes no column is not written, so only the inserted
 * and changed rows come back, each with `inserted` (and `previous_status` when asked).
 */
export function upsertStatement(s: UpsertSpec): string {
  const cols = s.columns.map(([c]) => c).filter((c) => c !== s.key);
  const list = cols.join(', ');
  const a = s.alias;
  const stamps = ['updated_at', ...(s.stamps ?? [])];
  return `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(${['new_id uuid', ...s.columns.map(([c, type]) => `${c} ${type}`)].join(', ')})
     ),
     old AS (
       SELECT ${[s.key, ...(s.previous ? [s.previous] : [])].map((c) => `${a}.${c}`).join(', ')}
         FROM ${s.table} ${a} JOIN input i ON i.${s.key} = ${a}.${s.key}
     ),
     up AS (
       INSERT INTO ${s.table} AS ${a} (id, ${s.key}, ${list}, ${stamps.join(', ')})
       SELECT new_id, ${s.key}, ${list}, ${stamps.map(() => '$2::timestamptz').join(', ')} FROM input
       ON CONFLICT (${s.key}) DO UPDATE SET ${[...cols, ...stamps].map((c) => `${c} = EXCLUDED.${c}`).join(', ')}
       WHERE (${cols.map((c) => `${a}.${c}`).join(', ')}) IS DISTINCT FROM (${cols.map((c) => `EXCLUDED.${c}`).join(', ')})
       RETURNING ${s.returning}
     )
     SELECT up.*${s.previous ? `, old.${s.previous} AS previous_status` : ''}${s.join ? `, ${s.join.select}` : ''}, (${insertedRow(s.key)}) AS inserted
       FROM up ${s.join?.from ?? ''} LEFT JOIN old ON old.${s.key} = up.${s.key}`;
}
