import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { type CliIo, createLogger, createPool, ManualClock, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, repoRoot, type TestDatabase, testUrls, uniqueName } from '@fcd/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOLD_AFTER_ENV } from '../src/billing/cli';
import { closePeriod } from '../src/billing/close';
import { landFromRedis } from '../src/billing/land';
import { run } from '../src/cli';
import { AccountStore } from '../src/store/accounts';
import { CounterStore } from '../src/store/counters';
import { migrations, USAGE_SCHEMA } from '../src/store/migrations';
import { StatementStore } from '../src/store/statements';

/**
 * The billing close against real Postgres and Redis (docs/metering.md, "Billing close"): accounts
 * are made with their creation date and tier changes in the past (SQL, through the tier-history
 * triggers), counts stored or left in Redis, and the close runs on an injected clock.
 */
const CLI = resolve(repoRoot, 'services/usage/dist/cli.js');
const logger = createLogger({ service: 'billing-test', level: 'silent' });

let db: TestDatabase;
let pool: Pool;
let redis: Redis;
let prefix: string;
let statements: StatementStore;
let accounts: AccountStore;
let env: Record<string, string>;

const close = (at: string, period: string) =>
  closePeriod(
    { statements, clock: new ManualClock(Date.parse(at)), landCounts: landFromRedis(new CounterStore(redis, prefix), accounts) },
    period,
  );

async function account(tier: string, createdAt: string, dailyLimit: number | null = null): Promise<string> {
  const id = `acct_${uniqueName('b')}`;
  await pool.query(
    'INSERT INTO usage.accounts (id, name, tier, daily_limit_override, created_at, updated_at) VALUES ($1, $1, $2, $3, $4, $4)',
    [id, tier, dailyLimit, createdAt],
  );
  return id;
}

async function store(accountId: string, counts: Record<string, number>): Promise<void> {
  await accounts.upsertDailyCounts(Object.entries(counts).map(([day, count]) => ({ accountId, day, count })));
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env };
  const code = await run(args, io);
  return { code, stdout, stderr };
}

beforeAll(async () => {
  db = await createTestDatabase('billing_close');
  pool = createPool({ connectionString: db.url, applicationName: 'test', logger });
  await migrate(pool, USAGE_SCHEMA, migrations);
  redis = new Redis(testUrls.redis);
  prefix = `${uniqueName('billing')}:`;
  statements = new StatementStore(pool);
  accounts = new AccountStore(pool);
  env = { DATABASE_URL: db.url, ...db.env, REDIS_URL: testUrls.redis, REDIS_KEY_PREFIX: prefix };
});

afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await pool.end();
  await db.drop();
});

describe('billing close', () => {
  it('prorates a Pro account downgraded to Free on day 11 by the days in each tier', async () => {
    const id = await account('pro', '2026-09-15T12:00:00Z');
    await store(id, { '2026-10-02': 30_000, '2026-10-10': 25_001, '2026-10-11': 100, '2026-10-20': 40 });
    await pool.query("UPDATE usage.accounts SET tier = 'free', updated_at = '2026-10-11T14:00:00Z' WHERE id = $1", [id]);
    const history = await pool.query('SELECT tier, effective_at FROM usage.tier_history WHERE account_id = $1 ORDER BY id', [id]);
    expect(history.rows).toEqual([
      { tier: 'pro', effective_at: new Date('2026-09-15T12:00:00Z') },
      { tier: 'free', effective_at: new Date('2026-10-11T14:00:00Z') },
    ]);

    // The store's tier change (the admin API's PATCH and the CLI's set-tier) writes its row in the same
    // transaction, at the change's updated_at; a call that changes nothing writes none.
    const later = await account('pro', '2026-09-01T00:00:00Z');
    await accounts.setTier(later, 'enterprise', 300_000);
    const changedAt = (await pool.query('SELECT updated_at FROM usage.accounts WHERE id = $1', [later])).rows[0].updated_at as Date;
    await accounts.setTier(later, 'enterprise', 300_000);
    const changed = await pool.query(
      'SELECT tier, daily_limit, overage_rate_usd::text AS rate, effective_at FROM usage.tier_history WHERE account_id = $1 ORDER BY id',
      [later],
    );
    expect(changed.rows).toEqual([
      { tier: 'pro', daily_limit: 25_000, rate: '0.003000', effective_at: new Date('2026-09-01T00:00:00Z') },
      { tier: 'enterprise', daily_limit: 300_000, rate: '0.002000', effective_at: changedAt },
    ]);
    // A change by SQL that leaves updated_at as it was is effective at its transaction's time, not at the old updated_at.
    const { rows: sqlChange } = await pool.query(
      `WITH c AS (UPDATE usage.accounts SET tier = 'pro', daily_limit_override = NULL WHERE id = $1 RETURNING now() AS at)
       SELECT at FROM c`,
      [later],
    );
    const last = await pool.query('SELECT tier, effective_at FROM usage.tier_history WHERE account_id = $1 ORDER BY id DESC LIMIT 1', [
      later,
    ]);
    expect(last.rows).toEqual([{ tier: 'pro', effective_at: sqlChange[0].at }]);

    await close('2026-11-01T00:06:00Z', '2026-10');
    const [s] = await statements.list({ period: '2026-10', accountId: id });
    expect(s).toEqual({
      accountId: id,
      period: '2026-10',
      tiers: [
        {
          tier: 'pro',
          days: 10,
          dailyLimit: 25_000,
          includedRequests: 250_000,
          overageRequests: 5_001,
          overageRateUsd: '0.003',
          amountUsd: '15.003',
        },
        {
          tier: 'free',
          days: 21,
          dailyLimit: 100,
          includedRequests: 2_100,
          overageRequests: 0,
          overageRateUsd: '0.000',
          amountUsd: '0.000',
        },
      ],
      totalRequests: 55_141,
      includedRequests: 252_100,
      overageRequests: 5_001,
      overageRateUsd: '0.000',
      amountUsd: '15.003',
      amountMicroUsd: 15_003_000n,
      closedAt: '2026-11-01T00:06:00.000Z',
      adjustments: [],
    });
  });

  it('refuses a period that has not ended with one line, and writes nothing', async () => {
    await account('pro', '2026-11-02T00:00:00Z');
    await expect(close('2026-11-28T10:00:00Z', '2026-11')).rejects.toThrow(
      'period 2026-11 has not ended: it can be closed from 2026-12-01T00:05:00.000Z',
    );
    await expect(close('2026-12-01T00:04:59Z', '2026-11')).rejects.toThrow('period 2026-11 has not ended');
    await expect(close('2026-12-01T00:06:00Z', '2026-13')).rejects.toThrow('period must be a month as YYYY-MM (got "2026-13")');
    const written = await pool.query(
      "SELECT (SELECT count(*) FROM usage.statements WHERE period = '2026-11')::int AS s, (SELECT count(*) FROM usage.billing_closes WHERE period = '2026-11')::int AS c",
    );
    expect(written.rows).toEqual([{ s: 0, c: 0 }]);
    // The CLI on the system clock: a period that has not begun is refused the same way, exit 1, one line.
    expect(await cli(['billing', 'close', '--period', '2999-01'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'usage-cli: period 2999-01 has not ended: it can be closed from 2999-02-01T00:05:00.000Z\n',
    });
  });

  it('lands live Redis counters first, changes nothing when run again, and adds a late count as an adjustment row', async () => {
    const id = await account('pro', '2026-09-01T00:00:00Z', 1_000);
    await store(id, { '2026-10-30': 1_200 });
    // Counted but not yet flushed by any replica: only in Redis.
    await redis.set(`${prefix}usage:{${id}}:2026-10-31`, '1500');
    const first = await close('2026-11-01T01:00:00Z', '2026-10');
    expect(first.countersLanded).toBe(1);
    const before = await statements.list({ period: '2026-10' });
    const mine = before.find((s) => s.accountId === id);
    expect(mine).toMatchObject({ totalRequests: 2_700, includedRequests: 31_000, overageRequests: 700, amountUsd: '2.100' });

    const again = await close('2026-11-02T01:00:00Z', '2026-10');
    expect(again).toMatchObject({ accounts: first.accounts, closed: 0, adjusted: 0, unchanged: first.accounts });
    expect(await statements.list({ period: '2026-10' })).toEqual(before);

    // A count that landed after the close (a replica's Redis restored late): an adjustment row, the statement as it was.
    await store(id, { '2026-10-31': 1_503 });
    expect(await close('2026-11-03T01:00:00Z', '2026-10')).toMatchObject({ closed: 0, adjusted: 1 });
    const [after] = await statements.list({ period: '2026-10', accountId: id });
    expect(after).toEqual({
      ...mine,
      adjustments: [
        {
          totalRequests: 3,
          includedRequests: 0,
          overageRequests: 3,
          amountUsd: '0.009',
          amountMicroUsd: 9_000n,
          createdAt: '2026-11-03T01:00:00.000Z',
        },
      ],
    });
    await expect(pool.query('UPDATE usage.statements SET total_requests = 0 WHERE account_id = $1', [id])).rejects.toThrow(
      'statements rows are immutable: add an adjustment instead',
    );
    expect(await cli(['billing', 'verify', '--period', '2026-10'])).toEqual({
      code: 0,
      stdout: `verified 2026-10: ${first.accounts} statements equal the stored daily counts\n`,
      stderr: '',
    });
  });

  it('billing verify exits non-zero with a clear line when a statement and the stored counts differ', async () => {
    const id = await account('free', '2026-06-01T00:00:00Z');
    await store(id, { '2026-07-04': 40 });
    await close('2026-08-01T00:10:00Z', '2026-07');
    expect((await cli(['billing', 'verify', '--period', '2026-07'])).code).toBe(0);
    await pool.query("UPDATE usage.daily_usage SET request_count = 41 WHERE account_id = $1 AND day = '2026-07-04'", [id]);
    expect(await cli(['billing', 'verify', '--period', '2026-07'])).toEqual({
      code: 1,
      stdout: '',
      stderr: `usage-cli: billing verify failed: 2026-07 ${id}: statement 40, stored daily counts 41 requests\n`,
    });
    expect(await cli(['billing', 'verify', '--period', '2026-05'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'usage-cli: no statements for 2026-05: the period is not closed\n',
    });
  });
});

/** Runs the built CLI as a process; resolves with its exit, or kills it with SIGKILL once stderr says `holding`. */
function cliProcess(
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; signal: string | null; stdout: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env, ...extraEnv } });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      if (d.toString().includes('billing close: holding')) child.kill('SIGKILL');
    });
    child.on('error', fail);
    child.on('exit', (code, signal) => done({ code, signal, stdout }));
  });
}

describe('billing close killed part-way', () => {
  it('gives the same statements when run again after a SIGKILL mid-close, and changes nothing a third time', async () => {
    const ids = [];
    for (let i = 1; i <= 5; i++) {
      const id = await account('pro', '2026-03-01T00:00:00Z', 100);
      await store(id, { '2026-04-15': 100 + i * 10 });
      ids.push(id);
    }
    const killed = await cliProcess(['billing', 'close', '--period', '2026-04', '--json'], { [HOLD_AFTER_ENV]: '2' });
    expect(killed).toEqual({ code: null, signal: 'SIGKILL', stdout: '' });
    const partial = await statements.list({ period: '2026-04' });
    expect(partial).toHaveLength(2);
    expect((await pool.query("SELECT 1 FROM usage.billing_closes WHERE period = '2026-04'")).rowCount).toBe(0);

    const rerun = await cliProcess(['billing', 'close', '--period', '2026-04', '--json']);
    expect(rerun.code).toBe(0);
    expect(JSON.parse(rerun.stdout)).toEqual({ period: '2026-04', accounts: 5, closed: 3, adjusted: 0, unchanged: 2, countersLanded: 0 });
    const all = await statements.list({ period: '2026-04' });
    expect(all.filter((s) => partial.some((p) => p.accountId === s.accountId))).toEqual(partial);
    expect(all.map((s) => [s.accountId, s.totalRequests, s.includedRequests, s.overageRequests, s.amountUsd])).toEqual(
      ids
        .map((id, i) => [id, 100 + (i + 1) * 10, 3_000, (i + 1) * 10, ['0.030', '0.060', '0.090', '0.120', '0.150'][i]])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );

    const third = await cliProcess(['billing', 'close', '--period', '2026-04', '--json']);
    expect(JSON.parse(third.stdout)).toMatchObject({ accounts: 5, closed: 0, adjusted: 0, unchanged: 5 });
    expect(await statements.list({ period: '2026-04' })).toEqual(all);
  });
});
