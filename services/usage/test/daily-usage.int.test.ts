import { AppError, createLogger, createPool, ManualClock, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase, testUrls, uniqueName } from '@fcd/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR } from '../src/domain/audit';
import { KeyCache } from '../src/domain/key-cache';
import { UsageMeter } from '../src/meter/index';
import { createUsageMetrics } from '../src/metrics';
import { AccountStore } from '../src/store/accounts';
import { CounterStore } from '../src/store/counters';
import { migrations, USAGE_SCHEMA } from '../src/store/migrations';

/** Usage history: the stored days, today's live count, and the overage billing computes, over a full calendar. */

let db: TestDatabase;
let pool: Pool;
let redis: Redis;
let accounts: AccountStore;
const logger = createLogger({ service: 'usage-daily-test', level: 'silent' });
const NOW = Date.parse('2026-11-22T08:00:00.000Z');
const clock = new ManualClock(NOW);
let meter: UsageMeter;

beforeAll(async () => {
  db = await createTestDatabase('usage_daily');
  pool = createPool({ connectionString: db.url, applicationName: 'test', logger });
  await migrate(pool, USAGE_SCHEMA, migrations);
  redis = new Redis(testUrls.redis);
  accounts = new AccountStore(pool);
  meter = new UsageMeter({
    accounts,
    counters: new CounterStore(redis, `${uniqueName('daily')}:`),
    cache: new KeyCache(clock, 5000, 1000),
    clock,
    logger,
    metrics: createUsageMetrics(),
    failOpen: false,
  });
});

afterAll(async () => {
  redis?.disconnect();
  await pool?.end();
  await db?.drop();
});

async function accountWithDays(tier: string, days: Record<string, number>, dailyLimit?: number) {
  const account = await accounts.createAccount({ name: `daily ${tier}`, tier, dailyLimit });
  // The account exists from before the fixture's days (its tier history's first row says when).
  await pool.query("UPDATE usage.tier_history SET effective_at = '2026-01-01T00:00:00Z' WHERE account_id = $1", [account.id]);
  const key = await accounts.keys.create(account.id, { name: 'default', expiresAt: null }, OPERATOR, NOW);
  await accounts.upsertDailyCounts(Object.entries(days).map(([day, count]) => ({ accountId: account.id, day, count })));
  return { accountId: account.id, apiKey: key.apiKey };
}

async function problem(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
    return 'answered';
  } catch (err) {
    if (err instanceof AppError) return { code: err.code, fields: err.details?.fields };
    throw err;
  }
}

describe('usage per day', () => {
  it('gives each day its stored count, today its live one, and the overage over the daily limit', async () => {
    const { accountId, apiKey } = await accountWithDays(
      'pro',
      { '2026-10-31': 99_999, '2026-11-18': 25_000, '2026-11-19': 25_007 },
      25_000,
    );
    // Today: three requests counted live in Redis, none flushed to Postgres yet.
    await meter.authorize([apiKey, apiKey, apiKey]);
    const history = await meter.dailyUsage(accountId, { from: '2026-11-17', to: '2026-11-22' });
    expect(history).toEqual({
      range: { from: '2026-11-17', to: '2026-11-22' },
      days: [
        { date: '2026-11-17', requests: 0, included: 25_000, overage: 0 },
        { date: '2026-11-18', requests: 25_000, included: 25_000, overage: 0 },
        { date: '2026-11-19', requests: 25_007, included: 25_000, overage: 7 },
        { date: '2026-11-20', requests: 0, included: 25_000, overage: 0 },
        { date: '2026-11-21', requests: 0, included: 25_000, overage: 0 },
        { date: '2026-11-22', requests: 3, included: 25_000, overage: 0 },
      ],
    });

    // The same figures as the usage report's billing period: the month's days sum to them.
    const month = await meter.dailyUsage(accountId, { from: '2026-11-01' });
    const report = await meter.usage(accountId);
    const sum = (f: (d: { requests: number; overage: number }) => number) => month?.days.reduce((n, d) => n + f(d), 0);
    expect([sum((d) => d.requests), sum((d) => d.overage), month?.days.length]).toEqual([
      report?.billing.totalRequests,
      report?.billing.overageRequests,
      22,
    ]);
    expect(report?.billing.overageRequests).toBe(7);
  });

  it('has no overage on Free (hard-limited), and the default range is the last 30 days', async () => {
    const { accountId } = await accountWithDays('free', { '2026-10-24': 100, '2026-10-23': 100, '2026-11-21': 150 });
    const history = await meter.dailyUsage(accountId, {});
    expect(history?.range).toEqual({ from: '2026-10-24', to: '2026-11-22' });
    expect(history?.days).toHaveLength(30);
    expect(history?.days.filter((d) => d.requests > 0)).toEqual([
      { date: '2026-10-24', requests: 100, included: 100, overage: 0 },
      { date: '2026-11-21', requests: 150, included: 100, overage: 0 },
    ]);
  });

  it('counts each day in the tier of its end, as the close bills it: a downgrade changes the days after it', async () => {
    const { accountId } = await accountWithDays('pro', { '2026-11-09': 25_010, '2026-11-10': 120, '2026-11-11': 101 });
    // Downgraded to Free at 10 Nov 15:00 UTC (the accounts trigger writes the history row).
    await pool.query("UPDATE usage.accounts SET tier = 'free', updated_at = '2026-11-10T15:00:00Z' WHERE id = $1", [accountId]);
    const history = await meter.dailyUsage(accountId, { from: '2026-11-09', to: '2026-11-11' });
    expect(history?.days).toEqual([
      { date: '2026-11-09', requests: 25_010, included: 25_000, overage: 10 },
      { date: '2026-11-10', requests: 120, included: 100, overage: 0 },
      { date: '2026-11-11', requests: 101, included: 100, overage: 0 },
    ]);
  });

  it('refuses a range of more than 400 days or backwards, and knows no unknown account', async () => {
    const { accountId } = await accountWithDays('pro', {});
    expect((await meter.dailyUsage(accountId, { from: '2025-10-19' }))?.days).toHaveLength(400);
    expect(await problem(meter.dailyUsage(accountId, { from: '2025-10-18' }))).toEqual({
      code: 'VALIDATION_ERROR',
      fields: [{ field: 'from', message: 'must be at most 400 days before to, both included' }],
    });
    expect(await problem(meter.dailyUsage(accountId, { from: '2026-11-20', to: '2026-11-19' }))).toEqual({
      code: 'VALIDATION_ERROR',
      fields: [{ field: 'from', message: 'must not be after to' }],
    });
    expect(await meter.dailyUsage('acct_missing', {})).toBeUndefined();
  });
});
