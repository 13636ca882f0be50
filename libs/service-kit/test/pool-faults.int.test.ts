import { eventually, FaultProxy, PrivatePostgres } from '@fcd/testing';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, createPool, isDatabaseUnavailable, withTransaction } from '../src/index';

/**
 * The shared pool against a private cluster that the test cuts: a client
 * held in a transaction whose backend is terminated does not crash the
 * process (its 'error' has a listener), the pool recovers without a
 * restart, and fcd_postgres_errors_total counts each kind.
 */
const DB = 'pool_faults';
let pgs: PrivatePostgres;
const logger = createLogger({ service: 'pool-faults-test', level: 'silent' });

beforeAll(async () => {
  pgs = await PrivatePostgres.start();
  await pgs.createDatabase(DB);
}, 60_000);

afterAll(async () => {
  await pgs?.destroy();
});

async function errors(registry: Registry): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('fcd_postgres_errors_total')?.get();
  return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.kind), v.value]));
}

describe('createPool through Postgres faults', () => {
  it('a client held in a transaction survives its backend being terminated; the pool recovers; errors are counted', async () => {
    const registry = new Registry();
    const pool = createPool({ connectionString: pgs.url(DB), applicationName: 'pool-faults', logger, registry });
    try {
      const uncaught: unknown[] = [];
      const onUncaught = (e: unknown) => uncaught.push(e);
      process.on('uncaughtException', onUncaught);
      const outcome = await withTransaction(pool, async (client) => {
        await client.query('SELECT 1');
        // Idle in the transaction (as while publishing to NATS), the backend is terminated.
        await pgs.terminateBackends(DB);
        await new Promise((r) => setTimeout(r, 300));
        return client.query('SELECT 2');
      }).catch((err: Error) => err.message);
      process.off('uncaughtException', onUncaught);
      expect(uncaught).toEqual([]);
      expect(outcome).toMatch(/terminat|Connection terminated|not queryable/i);
      // The broken client was destroyed, not returned to the pool: the next query gets a fresh one.
      expect((await pool.query<{ v: number }>('SELECT 3 AS v')).rows).toEqual([{ v: 3 }]);
      const counted = await errors(registry);
      expect(counted.checked_out_client).toBeGreaterThanOrEqual(1);

      await pgs.stopFast();
      await expect(pool.query('SELECT 1')).rejects.toThrow(/ECONNREFUSED|terminat/);
      await pgs.start();
      expect((await pool.query<{ v: number }>('SELECT 4 AS v')).rows).toEqual([{ v: 4 }]);
      expect((await errors(registry)).unavailable).toBeGreaterThanOrEqual(1);
    } finally {
      await pool.end();
    }
  });
});

describe('PG_QUERY_TIMEOUT_MS on the client: a statement that hears nothing back', () => {
  const TIMEOUT = 400;
  let proxy: FaultProxy;

  beforeAll(async () => {
    proxy = await FaultProxy.start({ port: pgs.port });
  });

  afterAll(async () => {
    await proxy?.close();
  });

  const silentPool = (registry = new Registry()) =>
    createPool({
      connectionString: `postgres://postgres@127.0.0.1:${proxy.port}/${DB}`,
      applicationName: 'pool-faults-silence',
      max: 1,
      logger,
      registry,
      timeouts: { PG_QUERY_TIMEOUT_MS: TIMEOUT, PG_CONNECT_TIMEOUT_MS: 1000 },
    });
  const backendPid = async (pool: ReturnType<typeof createPool>) =>
    (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;

  it('keeps an idle connection past the timeout, fails a statement with no answer as unavailable, drops its connection', async () => {
    const registry = new Registry();
    const pool = silentPool(registry);
    try {
      const first = await backendPid(pool);
      // Idle in the pool for longer than the timeout: the same connection serves the next statement.
      await new Promise((r) => setTimeout(r, TIMEOUT * 2));
      expect(await backendPid(pool)).toBe(first);

      proxy.blackhole();
      const started = Date.now();
      const err = (await pool.query('SELECT 1').catch((e: unknown) => e)) as Error;
      const waited = Date.now() - started;
      expect(err.message).toBe(`Query read timeout: no answer from Postgres within ${TIMEOUT} ms`);
      expect(isDatabaseUnavailable(err)).toBe(true);
      expect(waited).toBeGreaterThanOrEqual(TIMEOUT - 5);
      expect(waited).toBeLessThan(TIMEOUT + 1500);
      await eventually(
        async () => pool.totalCount,
        (n) => n === 0,
      );
      expect((await errors(registry)).unavailable).toBe(1);

      proxy.heal();
      const after = await backendPid(pool);
      expect(after).toEqual(expect.any(Number));
      expect(after).not.toBe(first);
    } finally {
      proxy.heal();
      await pool.end();
    }
  });

  it("fails a transaction's statement with no answer as unavailable; nothing is left uncaught and the pool recovers", async () => {
    const pool = silentPool();
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    try {
      const err = (await withTransaction(pool, async (client) => {
        await client.query('SELECT 1');
        proxy.blackhole();
        return client.query('SELECT 2');
      }).catch((e: unknown) => e)) as Error;
      expect(err.message).toBe(`Query read timeout: no answer from Postgres within ${TIMEOUT} ms`);
      expect(isDatabaseUnavailable(err)).toBe(true);
      proxy.heal();
      expect(await withTransaction(pool, async (client) => (await client.query<{ v: number }>('SELECT 3 AS v')).rows)).toEqual([{ v: 3 }]);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      proxy.heal();
      await pool.end();
    }
  });

  it('a statement slower than the timeout is ended (the server cancels it or the client closes), as unavailable', async () => {
    const pool = silentPool();
    try {
      const started = Date.now();
      const err = (await pool.query('SELECT pg_sleep(30)').catch((e: unknown) => e)) as Error;
      expect(isDatabaseUnavailable(err)).toBe(true);
      expect(Date.now() - started).toBeLessThan(TIMEOUT + 1500);
      expect((await pool.query<{ v: number }>('SELECT 4 AS v')).rows).toEqual([{ v: 4 }]);
    } finally {
      await pool.end();
    }
  });
});
