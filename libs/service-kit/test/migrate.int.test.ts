import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, createPool, type Migration, migrate, type Pool } from '../src/index';

/**
 * migrate(): one migrator at a time under a transaction-scoped advisory lock (so it also works
 * through PgBouncer in transaction pooling mode, services/gateway/test/pgbouncer.int.test.ts).
 */
const logger = createLogger({ service: 'migrate-test', level: 'silent' });
let database: TestDatabase;
let pools: Pool[] = [];

const steps: Migration[] = [
  { id: '0001_table', sql: 'CREATE TABLE things (id int PRIMARY KEY)' },
  { id: '0002_column', sql: 'ALTER TABLE things ADD COLUMN note text' },
  { id: '0003_row', sql: "INSERT INTO things VALUES (1, 'once')" },
];

beforeAll(async () => {
  database = await createTestDatabase('migrate');
  pools = Array.from({ length: 4 }, () => createPool({ connectionString: database.url, applicationName: 'migrate-test', logger, max: 1 }));
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await database?.drop();
});

describe('migrate', () => {
  it('applies each migration exactly once when 4 migrators start together, in id order', async () => {
    const applied = await Promise.all(pools.map((p) => migrate(p, 'concurrent', [...steps].reverse())));
    expect(applied.flat().sort()).toEqual(['0001_table', '0002_column', '0003_row']);
    const p = pools[0] as Pool;
    expect((await p.query('SELECT id, note FROM concurrent.things')).rows).toEqual([{ id: 1, note: 'once' }]);
    expect((await p.query('SELECT id FROM concurrent.schema_migrations ORDER BY applied_at, id')).rows.map((r) => r.id)).toEqual([
      '0001_table',
      '0002_column',
      '0003_row',
    ]);
    // Nothing left to do; no advisory lock outlives a migrate() call.
    expect(await migrate(p, 'concurrent', steps)).toEqual([]);
    const locks = await p.query(
      `SELECT count(*)::int AS n FROM pg_locks
        WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    expect(locks.rows[0].n).toBe(0);
  });

  it('rolls back a failing migration whole, keeps the ones before it, and applies it once fixed', async () => {
    const p = pools[1] as Pool;
    const broken: Migration = { id: '0002_broken', sql: 'CREATE TABLE half (id int); SELECT no_such_function()' };
    await expect(migrate(p, 'failing', [steps[0] as Migration, broken])).rejects.toThrow(/migration failing\/0002_broken failed/);
    expect((await p.query('SELECT id FROM failing.schema_migrations')).rows).toEqual([{ id: '0001_table' }]);
    expect((await p.query("SELECT to_regclass('failing.half') AS t")).rows[0].t).toBeNull();
    expect(await migrate(p, 'failing', [steps[0] as Migration, { id: '0002_broken', sql: 'CREATE TABLE half (id int)' }])).toEqual([
      '0002_broken',
    ]);
  });
});
