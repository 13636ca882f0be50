import { createRedisCluster, parseClusterNodes } from '@fcd/service-kit';
import { PrivateRedisCluster, uniqueName } from '@fcd/testing';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CounterStore } from '../src/store/counters';

/** The counter store on a real 3-primary, 3-replica Redis Cluster (own private cluster). */
let cluster: PrivateRedisCluster;
let redis: Cluster;
let store: CounterStore;
let prefix: string;
const DAY = '2026-11-24';

beforeAll(async () => {
  cluster = await PrivateRedisCluster.start();
  redis = createRedisCluster(parseClusterNodes(cluster.addresses.join(',')));
  await new Promise((r) => redis.once('ready', r));
  prefix = `${uniqueName('counters_cluster')}:`;
  store = new CounterStore(redis, prefix);
}, 60_000);

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

describe('CounterStore on a Redis Cluster (a batch split by slot)', () => {
  it('answers a batch whose accounts live on every primary in its original order, each account counted exactly', async () => {
    const accounts = Array.from({ length: 30 }, (_, i) => `acct-${i}`);
    const primaries = new Set(await Promise.all(accounts.map((a) => cluster.primaryOf(store.key(a, DAY)))));
    expect(primaries.size).toBe(3);
    await store.seed(accounts.map((a, i) => ({ accountId: a, day: DAY, count: i })));
    // Each account three times, interleaved; a hard limit of 31 refuses the third item of acct-29 only.
    const items = [0, 1, 2].flatMap(() => accounts.map((a) => ({ accountId: a, day: DAY, limit: 31, hard: true })));
    const outcomes = await store.authorize(items, Date.now() + 60_000);
    expect(outcomes).toEqual(
      [1, 2, 3].flatMap((round) =>
        accounts.map((_, i) => (i + round > 31 ? { kind: 'refused', count: 31 } : { kind: 'counted', count: i + round })),
      ),
    );
    expect(await store.get('acct-29', DAY)).toBe(31);
    expect(await store.get('acct-0', DAY)).toBe(3);
  });

  it('needs a seed for a missing counter, and counts nothing after the count-by time', async () => {
    expect(await store.authorize([{ accountId: 'never-seen', day: DAY, limit: 100, hard: true }])).toEqual([{ kind: 'needs_seed' }]);
    await store.seed([{ accountId: 'late', day: DAY, count: 7 }]);
    expect(await store.authorize([{ accountId: 'late', day: DAY, limit: 100, hard: true }], Date.now() - 5_000)).toEqual([
      { kind: 'too_late' },
    ]);
    expect(await store.get('late', DAY)).toBe(7);
  });

  it('counts a batch of 500 requests of one Free account to exactly its limit', async () => {
    await store.seed([{ accountId: 'burst', day: DAY, count: 0 }]);
    const outcomes = await store.authorize(Array.from({ length: 500 }, () => ({ accountId: 'burst', day: DAY, limit: 100, hard: true })));
    expect(outcomes.filter((o) => o.kind === 'counted').map((o) => (o as { count: number }).count)).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    expect(outcomes.slice(100).every((o) => o.kind === 'refused' && o.count === 100)).toBe(true);
  });

  it('finds the counters of every primary when scanning (reconciliation), and none of its answer keys', async () => {
    const found = await store.scanAll();
    const byAccount = new Map(found.map((f) => [f.accountId, f.count]));
    expect(byAccount.get('acct-0')).toBe(3);
    expect(byAccount.get('acct-29')).toBe(31);
    expect(byAccount.get('burst')).toBe(100);
    expect(byAccount.get('late')).toBe(7);
    expect(found.length).toBe(32);
    expect(found.every((f) => f.day === DAY)).toBe(true);
  });

  it('reports the cluster healthy, and refuses node lists that are not host:port', async () => {
    await expect(store.ping()).resolves.toBeUndefined();
    expect(parseClusterNodes('a:1, rediss://b.example:6380')).toEqual([
      { host: 'a', port: 1, tls: false },
      { host: 'b.example', port: 6380, tls: true },
    ]);
    expect(() => parseClusterNodes('a:1,b')).toThrow('REDIS_CLUSTER_NODES: "b" is not host:port');
  });
});
