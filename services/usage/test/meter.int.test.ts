import { createLogger, createPool, type KeyId, ManualClock, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, freePort, type TestDatabase, testUrls, uniqueName } from '@fcd/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OPERATOR } from '../src/domain/audit';
import { KeyCache } from '../src/domain/key-cache';
import { UsageMeter } from '../src/meter/index';
import { createUsageMetrics } from '../src/metrics';
import { AccountStore } from '../src/store/accounts';
import { CounterStore, createRedis } from '../src/store/counters';
import { migrations, USAGE_SCHEMA } from '../src/store/migrations';

let db: TestDatabase;
let pool: Pool;
let redis: Redis;
let accounts: AccountStore;
let prefix: string;
const logger = createLogger({ service: 'usage-test', level: 'silent' });

function meterWith(clock: ManualClock, options: { redis?: Redis; failOpen?: boolean; cacheTtlMs?: number } = {}) {
  const counters = new CounterStore(options.redis ?? redis, prefix);
  return new UsageMeter({
    accounts,
    counters,
    cache: new KeyCache(clock, options.cacheTtlMs ?? 5000, 1000),
    clock,
    logger,
    metrics: createUsageMetrics(),
    failOpen: options.failOpen ?? false,
  });
}

async function newKey(tier: string): Promise<{ accountId: string; apiKey: string; keyId: string }> {
  const account = await accounts.createAccount({ name: `t ${tier}`, tier });
  const { key, apiKey } = await accounts.keys.create(account.id, { name: 'default', expiresAt: null }, OPERATOR, Date.now());
  return { accountId: account.id, apiKey, keyId: key.id };
}

async function storedCount(accountId: string, day: string): Promise<number | undefined> {
  const { rows } = await pool.query<{ request_count: number }>(
    'SELECT request_count FROM usage.daily_usage WHERE account_id = $1 AND day = $2',
    [accountId, day],
  );
  return rows[0]?.request_count;
}

async function flushRedisPrefix(): Promise<void> {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
}

beforeAll(async () => {
  db = await createTestDatabase('usage_meter');
  pool = createPool({ connectionString: db.url, applicationName: 'test', logger });
  await migrate(pool, USAGE_SCHEMA, migrations);
  redis = new Redis(testUrls.redis);
  accounts = new AccountStore(pool);
});

beforeEach(() => {
  prefix = `${uniqueName('meter')}:`;
});

afterAll(async () => {
  await flushRedisPrefix();
  redis.disconnect();
  await pool.end();
  await db.drop();
});

describe('UsageMeter against real Postgres and Redis', () => {
  it('allows exactly 100 requests of a Free account under concurrent batches and refuses the rest uncounted', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T08:00:00.000Z'));
    const meter = meterWith(clock);
    const { apiKey } = await newKey('free');
    const batches = await Promise.all(Array.from({ length: 6 }, () => meter.authorize(Array(25).fill(apiKey))));
    const results = batches.flat();
    const allowed = results.filter((r) => r.decision === 'allowed');
    const refused = results.filter((r) => r.decision === 'rate_limited');
    expect(allowed).toHaveLength(100);
    expect(refused).toHaveLength(50);
    expect(allowed.map((r) => r.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(new Set(allowed.map((r) => r.remaining)).size).toBe(100);
    for (const r of refused) {
      expect(r).toMatchObject({ count: 100, remaining: 0, resetsAt: '2026-11-23T00:00:00.000Z', retryAfterSeconds: 16 * 3600 });
    }
  });

  it('resets the count at 00:00:00.000Z (day rollover with an injected clock)', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T23:59:59.999Z'));
    const meter = meterWith(clock);
    const { apiKey, accountId } = await newKey('free');
    const day1 = await meter.authorize(Array(101).fill(apiKey));
    expect(day1.filter((r) => r.decision === 'allowed')).toHaveLength(100);
    expect(day1[100]).toMatchObject({ decision: 'rate_limited', retryAfterSeconds: 1 });
    clock.advance(1);
    const [first] = await meter.authorize([apiKey]);
    expect(first).toMatchObject({ decision: 'allowed', count: 1, remaining: 99, resetsAt: '2026-11-24T00:00:00.000Z' });
    await meter.flush();
    expect(await storedCount(accountId, '2026-11-22')).toBe(100);
    expect(await storedCount(accountId, '2026-11-23')).toBe(1);
  });

  it('re-seeds today from Postgres after Redis loses its counters, so a Free account stays limited', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T12:00:00.000Z'));
    const meter = meterWith(clock);
    const { apiKey, accountId } = await newKey('free');
    expect((await meter.authorize(Array(60).fill(apiKey))).every((r) => r.decision === 'allowed')).toBe(true);
    await meter.flush();
    expect(await storedCount(accountId, '2026-11-22')).toBe(60);
    await flushRedisPrefix();
    const after = await meter.authorize(Array(100).fill(apiKey));
    expect(after.filter((r) => r.decision === 'allowed').map((r) => r.count)).toEqual(Array.from({ length: 40 }, (_, i) => 61 + i));
    expect(after.filter((r) => r.decision === 'rate_limited')).toHaveLength(60);
  });

  it('never refuses a Pro account and reports overage across earlier days already over the limit', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T09:30:00.000Z'));
    const meter = meterWith(clock);
    const { apiKey, accountId } = await newKey('pro');
    await accounts.upsertDailyCounts([
      { accountId, day: '2026-10-31', count: 90_000 },
      { accountId, day: '2026-11-02', count: 26_000 },
      { accountId, day: '2026-11-10', count: 25_000 },
      { accountId, day: '2026-11-15', count: 30_500 },
      { accountId, day: '2026-11-22', count: 24_995 },
    ]);
    const results = await meter.authorize(Array(10).fill(apiKey));
    expect(results.map((r) => r.decision)).toEqual(Array(10).fill('allowed'));
    expect(results.map((r) => r.count)).toEqual(Array.from({ length: 10 }, (_, i) => 24_996 + i));
    expect(results.map((r) => r.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0, 0, 0]);
    const usage = await meter.usage(accountId);
    expect(usage).toEqual({
      tier: 'pro',
      dailyLimit: 25_000,
      today: { requestCount: 25_005, remaining: 0, resetsAt: '2026-11-23T00:00:00.000Z' },
      billing: {
        start: '2026-11-01',
        end: '2026-11-30',
        totalRequests: 26_000 + 25_000 + 30_500 + 25_005,
        includedRequests: 750_000,
        overageRequests: 1_000 + 5_500 + 5,
        overageRateUsd: '0.003',
        estimatedOverageUsd: '19.515',
      },
      stale: false,
    });
  });

  it("reports an earlier day's unflushed counts of the account, and only its own", async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T23:59:59.000Z'));
    const meter = meterWith(clock);
    const a = await newKey('pro');
    const b = await newKey('pro');
    await meter.authorize([...Array(3).fill(a.apiKey), ...Array(5).fill(b.apiKey)]); // not flushed
    clock.advance(2000);
    const [first] = await meter.authorize([{ apiKey: a.apiKey, includeUsage: true }]);
    expect(first?.usage?.today).toEqual({ requestCount: 1, remaining: 24_999, resetsAt: '2026-11-24T00:00:00.000Z' });
    expect(first?.usage?.billing).toMatchObject({ start: '2026-11-01', end: '2026-11-30', totalRequests: 4, overageRequests: 0 });
    await meter.flush();
    expect(await storedCount(a.accountId, '2026-11-22')).toBe(3);
    expect(await storedCount(b.accountId, '2026-11-22')).toBe(5);
    const [again] = await meter.authorize([{ apiKey: b.apiKey, includeUsage: true }]);
    expect(again?.usage?.billing.totalRequests).toBe(6);
  });

  it('treats malformed, unknown and revoked keys alike and counts none of them', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T10:00:00.000Z'));
    const meter = meterWith(clock, { cacheTtlMs: 1000 });
    const { apiKey, keyId, accountId } = await newKey('free');
    expect((await meter.authorize([apiKey]))[0]?.decision).toBe('allowed');
    await accounts.keys.revoke(accountId, keyId as KeyId, OPERATOR, Date.now());
    clock.advance(1000); // the cached principal expires: revocation takes effect within the TTL
    const results = await meter.authorize(['', 'fcd_short', `fcd_${'Z'.repeat(32)}`, apiKey]);
    expect(results.map((r) => r.decision)).toEqual(['unauthenticated', 'unauthenticated', 'unauthenticated', 'unauthenticated']);
    await meter.flush();
    expect(await storedCount(accountId, '2026-11-22')).toBe(1);
  });

  it('persists idempotently: flushing never lowers a stored count', async () => {
    const { accountId } = await newKey('pro');
    await accounts.upsertDailyCounts([{ accountId, day: '2026-11-20', count: 50 }]);
    await accounts.upsertDailyCounts([{ accountId, day: '2026-11-20', count: 40 }]);
    await accounts.upsertDailyCounts([{ accountId, day: '2026-11-20', count: 50 }]);
    expect(await storedCount(accountId, '2026-11-20')).toBe(50);
  });

  it('reconciles counters of a replica that died before flushing into Postgres', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T14:00:00.000Z'));
    const dead = meterWith(clock);
    const { apiKey, accountId } = await newKey('free');
    await dead.authorize(Array(30).fill(apiKey)); // never flushed
    expect(await storedCount(accountId, '2026-11-22')).toBeUndefined();
    const survivor = meterWith(clock);
    expect(await survivor.reconcile()).toBeGreaterThanOrEqual(1);
    expect(await storedCount(accountId, '2026-11-22')).toBe(30);
  });

  it('fails closed when Redis is unreachable, and counts exactly in Postgres when fail-open is enabled', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T15:00:00.000Z'));
    const down = createRedis(`redis://127.0.0.1:${await freePort()}`);
    down.on('error', () => undefined);
    try {
      const { apiKey, accountId } = await newKey('free');
      const closed = await meterWith(clock, { redis: down }).authorize([apiKey]);
      expect(closed[0]).toMatchObject({ decision: 'unavailable', retryAfterSeconds: 1 });

      await accounts.upsertDailyCounts([{ accountId, day: '2026-11-22', count: 98 }]);
      const open = await meterWith(clock, { redis: down, failOpen: true }).authorize([apiKey, apiKey, apiKey]);
      expect(open.map((r) => [r.decision, r.count])).toEqual([
        ['allowed', 99],
        ['allowed', 100],
        ['rate_limited', 100],
      ]);
      expect(await storedCount(accountId, '2026-11-22')).toBe(100);
    } finally {
      down.disconnect();
    }
  });

  it('after fail-open counting, lifts a counter Redis kept through the outage to the exact count', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T16:00:00.000Z'));
    const client = createRedis(testUrls.redis);
    client.on('error', () => undefined);
    await new Promise((r) => client.once('ready', r));
    try {
      const meter = meterWith(clock, { redis: client, failOpen: true });
      const { apiKey } = await newKey('free');
      const before = await meter.authorize(Array(60).fill(apiKey));
      expect(before.every((r) => r.decision === 'allowed')).toBe(true);

      client.disconnect(); // a partition: Redis keeps its counter (60) but this replica cannot reach it
      const during = await meter.authorize(Array(30).fill(apiKey));
      expect(during.map((r) => r.count)).toEqual(Array.from({ length: 30 }, (_, i) => 61 + i));

      await client.connect();
      const after = await meter.authorize(Array(20).fill(apiKey));
      expect(after.filter((r) => r.decision === 'allowed').map((r) => r.count)).toEqual(Array.from({ length: 10 }, (_, i) => 91 + i));
      expect(after.filter((r) => r.decision === 'rate_limited')).toHaveLength(10);
    } finally {
      client.disconnect();
    }
  });
});
