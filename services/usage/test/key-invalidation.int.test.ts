import { createLogger, createRedisCluster, ManualClock, parseClusterNodes } from '@fcd/service-kit';
import { eventually, PrivateRedisCluster, testUrls, uniqueName } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyCache } from '../src/domain/key-cache';
import type { KeyPrincipal } from '../src/domain/tiers';
import { KeyInvalidation } from '../src/meter/key-invalidation';
import { createRedis, type RedisClient } from '../src/store/counters';

/**
 * Key changes published by one replica empty the other replicas' caches of that account (Redis
 * pub/sub), on a single Redis and on a Redis Cluster, through the counters' own kind of connection
 * (no offline queue: the subscriber must bring its own).
 */
const logger = createLogger({ service: 'usage-key-invalidation-test', level: 'silent' });
let cluster: PrivateRedisCluster;

beforeAll(async () => {
  cluster = await PrivateRedisCluster.start();
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

const principal = (accountId: string): KeyPrincipal => ({
  keyId: `key_${accountId}`,
  accountId,
  tier: 'pro',
  tierRank: 1,
  dailyLimit: 25_000,
  hardLimit: false,
  overageRateUsd: '0.003',
  revoked: false,
});

async function replicasOn(connect: () => RedisClient) {
  const prefix = `${uniqueName('keyinv')}:`;
  const replicas = [0, 1].map(() => {
    const redis = connect();
    redis.on('error', () => undefined);
    const cache = new KeyCache(new ManualClock(0), 60_000, 1000);
    const invalidation = new KeyInvalidation({ redis, cache, logger }, prefix);
    const stop = new AbortController();
    const running = invalidation.worker().run(stop.signal);
    return { redis, cache, invalidation, stop, running };
  });
  return {
    replicas,
    async close() {
      for (const r of replicas) r.stop.abort();
      await Promise.all(replicas.map((r) => r.running));
      for (const r of replicas) r.redis.disconnect();
    },
  };
}

describe.each([
  ['a single Redis', () => createRedis(testUrls.redis)],
  ['a Redis Cluster', () => createRedisCluster(parseClusterNodes(cluster.addresses.join(',')))],
])('key invalidation on %s', (_name, connect) => {
  it("drops the account's cached keys on every replica, and only that account's", async () => {
    const { replicas, close } = await replicasOn(connect);
    try {
      const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
      // Subscribed: a warm-up account published by a reaches b's cache.
      b.cache.set('warm', principal('acct_warm'));
      await eventually(
        async () => {
          await a.invalidation.publish('acct_warm');
          return b.cache.get('warm');
        },
        (v) => v === undefined,
      );
      for (const r of replicas) {
        r.cache.set('digest-1', principal('acct_1'));
        r.cache.set('digest-2', principal('acct_2'));
      }
      await a.invalidation.publish('acct_1');
      // The publisher's own cache at once; the other's when the message arrives.
      expect(a.cache.get('digest-1')).toBeUndefined();
      await eventually(
        async () => b.cache.get('digest-1'),
        (v) => v === undefined,
        5000,
        10,
      );
      for (const r of replicas) expect(r.cache.get('digest-2')?.accountId).toBe('acct_2');
    } finally {
      await close();
    }
  });
});
