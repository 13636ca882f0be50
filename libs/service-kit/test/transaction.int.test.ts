import { randomBytes } from 'node:crypto';
import { testUrls } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, createPool, withTransaction, withTransactionFrom } from '../src/index';

/**
 * withTransactionFrom: the first statement goes out with the BEGIN (one simple-protocol message),
 * in the transaction `fn` continues; a failure of either rolls back both.
 */

const logger = createLogger({ service: 'tx-test', level: 'silent' });
const schema = `svc_kit_tx_${randomBytes(4).toString('hex')}`;
const pool = createPool({ connectionString: testUrls.database, applicationName: 'tx-test', logger, max: 1 });

beforeAll(async () => {
  await pool.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.t (v int PRIMARY KEY)`);
});

afterAll(async () => {
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  await pool.end();
});

const values = async () => (await pool.query<{ v: number }>(`SELECT v FROM ${schema}.t ORDER BY v`)).rows.map((r) => r.v);

describe('withTransactionFrom', () => {
  it("hands fn the first statement's rows, in the same transaction, and commits both", async () => {
    const out = await withTransactionFrom(
      pool,
      `INSERT INTO ${schema}.t VALUES (1), (2) RETURNING v, pg_current_xact_id()::text AS xid`,
      async (client, rows: Array<{ v: number; xid: string }>) => {
        const { rows: same } = await client.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
        await client.query(`INSERT INTO ${schema}.t VALUES (3)`);
        return { v: rows.map((r) => r.v), sameTransaction: rows.every((r) => r.xid === same[0]?.xid) };
      },
    );
    expect(out).toEqual({ v: [1, 2], sameTransaction: true });
    expect(await values()).toEqual([1, 2, 3]);
  });

  it("rolls back the first statement's writes when fn fails, and the client is clean for the next transaction", async () => {
    await expect(
      withTransactionFrom(pool, `INSERT INTO ${schema}.t VALUES (10) RETURNING v`, async () => {
        throw new Error('fn failed');
      }),
    ).rejects.toThrow('fn failed');
    // One client in the pool: a transaction left open or aborted would fail this one.
    expect(await withTransaction(pool, async (client) => (await client.query<{ n: number }>('SELECT 1 AS n')).rows[0]?.n)).toBe(1);
    expect(await values()).toEqual([1, 2, 3]);
  });

  it('rejects with the error of a failing first statement without running fn, and rolls it back', async () => {
    let ran = false;
    await expect(
      withTransactionFrom(pool, `INSERT INTO ${schema}.t VALUES (20); INSERT INTO ${schema}.t VALUES (1)`, async () => {
        ran = true;
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(ran).toBe(false);
    expect(await values()).toEqual([1, 2, 3]);
  });

  it('sends the transaction-pooled prelude first: the first statement runs under its statement_timeout', async () => {
    const pooled = createPool({
      connectionString: testUrls.database,
      applicationName: 'tx-test-pooled',
      logger,
      timeouts: { PG_QUERY_TIMEOUT_MS: 1234 },
      connection: { poolMode: 'transaction' },
    });
    try {
      const seen = await withTransactionFrom(
        pooled,
        'SHOW statement_timeout',
        async (_client, rows: Array<{ statement_timeout: string }>) => rows.map((r) => r.statement_timeout),
      );
      expect(seen).toEqual(['1234ms']);
    } finally {
      await pooled.end();
    }
  });
});
