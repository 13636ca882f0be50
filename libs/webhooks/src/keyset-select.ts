import { fetchSize, type KeysetOrder, keysetAfter, keysetOrderBy, type Pool, type Rows, takeRows } from '@fcd/service-kit';
import { columnsOf, type FieldSpecs, recordOf } from './fields';
import { type ListPosition, NEWEST_FIRST } from './lists';

/**
 * One page of a keyset list (./lists.ts) in SQL, for every list of the schema: the rows of one
 * table that pass its conditions, strictly after a position in the list's order, at most `limit`
 * (one more is fetched to tell whether more follow), each read into its record by the resource's
 * declaration (./fields.ts).
 */
export interface KeysetSelect<R> {
  /** The table, e.g. `webhook.deliveries`. */
  table: string;
  fields: FieldSpecs<R>;
  order: KeysetOrder;
  /** Conditions, ANDed, each with its one parameter written `$?`. */
  where: ReadonlyArray<readonly [condition: string, value: unknown]>;
  /** The position's values, one per column of the order; none: from the start. */
  after?: readonly unknown[];
}

export async function selectKeysetPage<R>(pool: Pool, select: KeysetSelect<R>, limit: number): Promise<Rows<R>> {
  const params: unknown[] = [];
  const param = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  // The order's columns qualified: a select alias of the same name (e.g. `position::text AS position`) is not the column.
  const order = { ...select.order, columns: select.order.columns.map((c) => `t.${c}`) };
  const where = select.where.map(([condition, value]) => {
    // One value, one placeholder: a condition using it twice must bind it twice (two entries).
    if (condition.split('$?').length !== 2) throw new Error(`a keyset condition takes exactly one $?: ${condition}`);
    return condition.replace('$?', param(value));
  });
  if (select.after) where.push(keysetAfter(order, select.after.map(param)));
  const { rows } = await pool.query<Record<string, unknown>>(
    `SELECT ${columnsOf(select.fields)} FROM ${select.table} t WHERE ${where.length > 0 ? where.join(' AND ') : 'true'}
      ORDER BY ${keysetOrderBy(order)} LIMIT ${param(fetchSize(limit))}`,
    params,
  );
  const page = takeRows(rows, limit);
  return { items: page.items.map((row) => recordOf(select.fields, row)), has_more: page.has_more };
}

/** A newest-first list (subscriptions of an account, deliveries of a subscription): the owner's rows of `table`, after `after`. */
export function selectNewestFirst<R>(
  pool: Pool,
  list: { table: string; fields: FieldSpecs<R>; owner: readonly [column: string, id: string] },
  limit: number,
  after?: ListPosition,
): Promise<Rows<R>> {
  const [column, id] = list.owner;
  return selectKeysetPage(
    pool,
    {
      table: list.table,
      fields: list.fields,
      order: NEWEST_FIRST,
      where: [[`${column} = $?`, id]],
      after: after && [new Date(after.created_at), after.id],
    },
    limit,
  );
}
