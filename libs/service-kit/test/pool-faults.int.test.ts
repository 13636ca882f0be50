import { PrivatePostgres } from '@fcd/testing';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, createPool, withTransaction } from '../src/index';

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
