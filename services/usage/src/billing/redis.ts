import { clusterFromSettings, Env, parseConfig, RedisEnv, redisOptions, redisTargetProblems } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';
import { Redis } from 'ioredis';
import { CounterStore, type RedisClient } from '../store/counters';

const BillingRedisEnv = Type.Object({
  REDIS_URL: Type.Optional(Env.url()),
  REDIS_KEY_PREFIX: Type.String({ default: 'fcd:', pattern: '^[A-Za-z0-9:_-]*$' }),
  ...RedisEnv,
});

/**
 * The usage service's Redis (or Redis Cluster) for a CLI close, which copies the period's live
 * counters into Postgres first: the same settings as the service (REDIS_URL or REDIS_CLUSTER_NODES,
 * REDIS_KEY_PREFIX, credentials, TLS). Waits for the connection (bounded); a Redis that cannot be
 * reached fails the close.
 */
export async function openBillingCounters(env: Record<string, string | undefined>): Promise<{ counters: CounterStore; close(): void }> {
  const config = parseConfig(BillingRedisEnv, env);
  const problems = redisTargetProblems(config);
  if (problems.length > 0) throw new Error(`billing close copies the live counters first: ${problems.join('; ')}`);
  const redis: RedisClient =
    clusterFromSettings(config, (scheme) => redisOptions(config, scheme)) ??
    new Redis(config.REDIS_URL as string, {
      ...redisOptions(config, config.REDIS_URL as string),
      maxRetriesPerRequest: 2,
      connectTimeout: 5000,
    });
  // Errors reach the close through its commands; the events would only repeat them.
  redis.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    if (redis.status === 'ready') return resolve();
    const timer = setTimeout(() => reject(new Error('redis: no connection within 10 s')), 10_000);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  }).catch((err: unknown) => {
    redis.disconnect();
    throw err;
  });
  return { counters: new CounterStore(redis, config.REDIS_KEY_PREFIX), close: () => redis.disconnect() };
}
