import { testUrls, uniqueName } from '@fcd/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CounterStore } from '../src/store/counters';

/** The counter store's one-call-per-batch Lua script against the real Redis (own key prefix). */
let redis: Redis;
let prefix: string;
let store: CounterStore;
const DAY = '2026-11-23';

beforeAll(() => {
  redis = new Redis(testUrls.redis);
  prefix = `${uniqueName('counters')}:`;
  store = new CounterStore(redis, prefix);
});

afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

describe('CounterStore.authorize (one Lua call per batch)', () => {
  it("counts nothing when Redis runs the batch after its count-by time (on Redis's clock), and counts before it", async () => {
    await store.seed([{ accountId: 'deadline', day: DAY, count: 5 }]);
    const [seconds] = await redis.time();
    const redisNow = Number(seconds) * 1000;
    const item = { accountId: 'deadline', day: DAY, limit: 100, hard: true };
    expect(await store.authorize([item, item], redisNow - 1000)).toEqual([{ kind: 'too_late' }, { kind: 'too_late' }]);
    expect(await store.get('deadline', DAY)).toBe(5);
    expect(await store.authorize([item], redisNow + 60_000)).toEqual([{ kind: 'counted', count: 6 }]);
    expect(await store.authorize([item], 0)).toEqual([{ kind: 'counted', count: 7 }]);
  });

  it('peeks without counting: under the limit allowed at the current count, at a hard limit refused', async () => {
    await store.seed([
      { accountId: 'peek-free', day: DAY, count: 99 },
      { accountId: 'peek-pro', day: DAY, count: 25_000 },
    ]);
    const peek = { accountId: 'peek-free', day: DAY, limit: 100, hard: true, peek: true };
    const count = { accountId: 'peek-free', day: DAY, limit: 100, hard: true };
    expect(
      await store.authorize([peek, peek, count, peek, { accountId: 'peek-pro', day: DAY, limit: 25_000, hard: false, peek: true }]),
    ).toEqual([
      { kind: 'peeked', count: 99 },
      { kind: 'peeked', count: 99 },
      { kind: 'counted', count: 100 },
      { kind: 'refused', count: 100 },
      { kind: 'peeked', count: 25_000 },
    ]);
    expect(await store.get('peek-free', DAY)).toBe(100);
    expect(await store.get('peek-pro', DAY)).toBe(25_000);
    expect(await store.authorize([{ ...peek, accountId: 'peek-missing' }])).toEqual([{ kind: 'needs_seed' }]);
  });

  it('decides each item in order: missing counters need a seed, hard limits refuse, soft limits count past the limit', async () => {
    await store.seed([
      { accountId: 'free-a', day: DAY, count: 98 },
      { accountId: 'free-full', day: DAY, count: 100 },
      { accountId: 'pro-over', day: DAY, count: 25_000 },
    ]);
    const outcomes = await store.authorize([
      { accountId: 'free-a', day: DAY, limit: 100, hard: true },
      { accountId: 'missing', day: DAY, limit: 100, hard: true },
      { accountId: 'free-a', day: DAY, limit: 100, hard: true },
      { accountId: 'free-full', day: DAY, limit: 100, hard: true },
      { accountId: 'free-a', day: DAY, limit: 100, hard: true },
      { accountId: 'pro-over', day: DAY, limit: 25_000, hard: false },
    ]);
    expect(outcomes).toEqual([
      { kind: 'counted', count: 99 },
      { kind: 'needs_seed' },
      { kind: 'counted', count: 100 },
      { kind: 'refused', count: 100 },
      { kind: 'refused', count: 100 },
      { kind: 'counted', count: 25_001 },
    ]);
    expect(await store.get('free-a', DAY)).toBe(100);
    expect(await store.get('free-full', DAY)).toBe(100);
    expect(await store.get('missing', DAY)).toBeUndefined();
    expect(await store.get('pro-over', DAY)).toBe(25_001);
  });

  it('answers an empty batch with nothing, and keeps the seeded TTL on counted keys', async () => {
    expect(await store.authorize([])).toEqual([]);
    await store.seed([{ accountId: 'ttl', day: DAY, count: 5 }]);
    expect(await store.authorize([{ accountId: 'ttl', day: DAY, limit: 100, hard: true }])).toEqual([{ kind: 'counted', count: 6 }]);
    const ttl = await redis.ttl(store.key('ttl', DAY));
    expect(ttl).toBeGreaterThan(3 * 86_400 - 60);
    expect(ttl).toBeLessThanOrEqual(3 * 86_400);
  });

  it('counts a batch of 500 requests of one Free account to exactly its limit', async () => {
    await store.seed([{ accountId: 'burst', day: DAY, count: 0 }]);
    const outcomes = await store.authorize(Array.from({ length: 500 }, () => ({ accountId: 'burst', day: DAY, limit: 100, hard: true })));
    expect(outcomes.filter((o) => o.kind === 'counted').map((o) => (o as { count: number }).count)).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    expect(outcomes.slice(100).every((o) => o.kind === 'refused' && o.count === 100)).toBe(true);
  });
});
