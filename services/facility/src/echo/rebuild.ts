import type { PoolClient } from '@fcd/service-kit';

interface Definition {
  /** The table the constraint is on (for constraints; '' for indexes). */
  table: string;
  name: string;
  def: string;
}

/**
 * What a first load takes off `table` around its bulk insert, read from the catalogs so it
 * follows the migrations: the foreign keys from and to the table, its primary key and unique
 * constraints, and its other B-tree and GIN indexes. GiST indexes stay: a GiST build inserts
 * every row anyway, so rebuilding one saves nothing (measured: slower).
 */
async function definitions(
  client: PoolClient,
  table: string,
): Promise<{ foreign: Definition[]; keys: Definition[]; indexes: Definition[] }> {
  const constraints = await client.query<Definition & { type: string }>(
    `SELECT c.conrelid::regclass::text AS table, quote_ident(c.conname) AS name, c.contype AS type, pg_get_constraintdef(c.oid) AS def
       FROM pg_constraint c
      WHERE (c.contype IN ('p', 'u') AND c.conrelid = $1::regclass)
         OR (c.contype = 'f' AND (c.conrelid = $1::regclass OR c.confrelid = $1::regclass))
      ORDER BY c.contype, c.conname`,
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
  return {
    foreign: constraints.rows.filter((c) => c.type === 'f'),
    keys: constraints.rows.filter((c) => c.type !== 'f'),
    indexes: indexes.rows,
  };
}

/**
 * A first load's bulk inserts run without the served tables' keys, foreign keys and B-tree/GIN
 * indexes: `drop(table)` before the first insert into a table, `restore()` before the transaction
 * commits adds everything back from its definitions. One sorted build per index (and one validating
 * join per foreign key) is several times cheaper than maintaining each of them row by row (200,000
 * violations COPYed in 3.3 s with their keys, 0.8 s without, 0.6 s to build them:
 * docs/benchmarks/history/2026-11-27.md, "11:05–11:50"). The keys are checked when they are added:
 * a duplicate or a dangling reference fails the transaction, which rolls back to the original
 * definitions (DDL is transactional), so nothing weaker is ever committed. What runs between must
 * not need the keys (no ON CONFLICT on them; joins use hash plans instead of the indexes). Dropping
 * a foreign key locks both of its tables (ACCESS EXCLUSIVE), so a first load fills the facilities
 * and the violations in one transaction (sync.ts): the API reads neither until both are there.
 */
export class KeyRebuilds {
  private readonly dropped = new Map<string, Awaited<ReturnType<typeof definitions>>>();
  /** Constraints already dropped (a foreign key belongs to both of its tables). */
  private readonly droppedNames = new Set<string>();

  constructor(private readonly client: PoolClient) {}

  /** Drops `table`'s keys and indexes, once per transaction. */
  async drop(table: string): Promise<void> {
    if (this.dropped.has(table)) return;
    const defs = await definitions(this.client, table);
    const fresh = (c: Definition) => !this.droppedNames.has(`${c.table}.${c.name}`);
    const mine = { foreign: defs.foreign.filter(fresh), keys: defs.keys.filter(fresh), indexes: defs.indexes };
    for (const c of [...mine.foreign, ...mine.keys]) {
      await this.client.query(`ALTER TABLE ${c.table} DROP CONSTRAINT ${c.name}`);
      this.droppedNames.add(`${c.table}.${c.name}`);
    }
    if (mine.indexes.length > 0) await this.client.query(`DROP INDEX ${mine.indexes.map((r) => r.name).join(', ')}`);
    this.dropped.set(table, mine);
  }

  /** Adds back everything dropped: keys first (the foreign keys reference them), then the indexes. */
  async restore(): Promise<void> {
    if (this.dropped.size === 0) return;
    const all = [...this.dropped.values()];
    await this.client.query("SET LOCAL maintenance_work_mem = '256MB'");
    for (const c of all.flatMap((d) => d.keys)) await this.client.query(`ALTER TABLE ${c.table} ADD CONSTRAINT ${c.name} ${c.def}`);
    for (const c of all.flatMap((d) => d.foreign)) await this.client.query(`ALTER TABLE ${c.table} ADD CONSTRAINT ${c.name} ${c.def}`);
    for (const r of all.flatMap((d) => d.indexes)) await this.client.query(r.def);
    await this.client.query('SET LOCAL maintenance_work_mem TO DEFAULT');
    this.dropped.clear();
    this.droppedNames.clear();
  }
}
