import type { PoolClient } from '@fcd/service-kit';

interface Definition {
  /** The table the constraint is on (for constraints; '' for indexes). */
  table: string;
  name: string;
  def: string;
}

/**
 * What a first load takes off `table` around its bulk insert, read from the catalogs so it
 * follows the migrations: its primary key and unique constraints that no foreign key references,
 * and its other B-tree and GIN indexes. Foreign keys stay, and so do the keys they reference:
 * dropping either locks the other table too (ACCESS EXCLUSIVE on both), so the API could not read
 * the facilities while the violations load. GiST indexes stay: a GiST build inserts every row
 * anyway, so rebuilding one saves nothing (measured: slower).
 */
async function definitions(client: PoolClient, table: string): Promise<{ keys: Definition[]; indexes: Definition[] }> {
  const keys = await client.query<Definition>(
    `SELECT c.conrelid::regclass::text AS table, quote_ident(c.conname) AS name, pg_get_constraintdef(c.oid) AS def
       FROM pg_constraint c
      WHERE c.contype IN ('p', 'u') AND c.conrelid = $1::regclass
        AND NOT EXISTS (SELECT 1 FROM pg_constraint fk WHERE fk.contype = 'f' AND fk.conindid = c.conindid)
      ORDER BY c.conname`,
    [table],
  );
  const indexes = await client.query<Definition>(
    `SELECT '' AS table, i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
       FROM pg_index i
      WHERE i.indrelid = $1::regclass AND NOT i.indisexclusion
        AND (SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam WHERE c.oid = i.indexrelid) IN ('btree', 'gin')
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
      ORDER BY 1`,
    [table],
  );
  return { keys: keys.rows, indexes: indexes.rows };
}

/**
 * A first load's bulk inserts run without the served tables' keys and B-tree/GIN indexes
 * (definitions above): `drop(table)` before the first insert into a table, `restore()` before
 * the transaction commits adds them back from their definitions. One sorted build per index is
 * several times cheaper than maintaining each of them row by row (docs/benchmarks.md: 200,000
 * violations COPYed in 3.3 s with their primary and unique keys, well under 1 s without, and
 * 0.4 s to build those keys). A key is checked when it is added: a duplicate fails the
 * transaction, which rolls back to the original definitions (DDL is transactional), so nothing
 * weaker is ever committed. What runs between must not need the keys (no ON CONFLICT on them;
 * joins use hash plans instead of the indexes). Readers of the table wait for the commit (the
 * transaction holds it exclusively); on a first load there is nothing of it to read yet.
 */
export class KeyRebuilds {
  private readonly dropped = new Map<string, Awaited<ReturnType<typeof definitions>>>();

  constructor(private readonly client: PoolClient) {}

  /** Drops `table`'s keys and indexes, once per transaction. */
  async drop(table: string): Promise<void> {
    if (this.dropped.has(table)) return;
    const defs = await definitions(this.client, table);
    for (const c of defs.keys) await this.client.query(`ALTER TABLE ${c.table} DROP CONSTRAINT ${c.name}`);
    if (defs.indexes.length > 0) await this.client.query(`DROP INDEX ${defs.indexes.map((r) => r.name).join(', ')}`);
    this.dropped.set(table, defs);
  }

  /** Adds back everything dropped: the keys, then the indexes. */
  async restore(): Promise<void> {
    if (this.dropped.size === 0) return;
    const all = [...this.dropped.values()];
    await this.client.query("SET LOCAL maintenance_work_mem = '256MB'");
    for (const c of all.flatMap((d) => d.keys)) await this.client.query(`ALTER TABLE ${c.table} ADD CONSTRAINT ${c.name} ${c.def}`);
    for (const r of all.flatMap((d) => d.indexes)) await this.client.query(r.def);
    await this.client.query('SET LOCAL maintenance_work_mem TO DEFAULT');
    this.dropped.clear();
  }
}
