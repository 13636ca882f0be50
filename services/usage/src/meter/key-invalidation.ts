import type { Worker } from '@fcd/service-kit';
import { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { KeyCache } from '../domain/key-cache';
import type { RedisClient } from '../store/counters';

/**
 * Tells every usage replica that an account's keys changed (revoked, rolled), through Redis
 * pub/sub on `<prefix>keys:changed` (the account id as message): each replica drops that account's
 * cached keys at once, so they are looked up again on their next use. The replica that made the
 * change drops them itself first. A message lost (a replica reconnecting to Redis, Redis down) is
 * covered by the cache's own bound: an entry is used for at most KEY_CACHE_TTL_MS (5 s), so a
 * revocation takes effect everywhere within that time even without the message (docs/metering.md).
 */
export class KeyInvalidation {
  readonly channel: string;

  constructor(
    private readonly deps: { redis: RedisClient; cache: KeyCache; logger: Logger },
    prefix: string,
  ) {
    this.channel = `${prefix}keys:changed`;
  }

  /** Drops the account's cached keys here and asks every replica to do the same (best effort: the TTL bounds a lost message). */
  async publish(accountId: string): Promise<void> {
    this.deps.cache.evictAccount(accountId);
    try {
      await this.deps.redis.publish(this.channel, accountId);
    } catch (err) {
      this.deps.logger.warn(
        { err: { message: (err as Error).message } },
        'key change not published; other replicas follow within the key cache TTL',
      );
    }
  }

  /** The subscriber: its own Redis connection (a subscribed connection runs no other command), until stopped. */
  worker(): Worker {
    return {
      name: 'key invalidation',
      run: async (signal) => {
        const { redis } = this.deps;
        // The counters' connection refuses commands while disconnected (no offline queue); the
        // subscription instead waits for the connection, and ioredis subscribes again after a reconnect.
        const subscriber: RedisClient =
          redis instanceof Cluster ? redis.duplicate([], { enableOfflineQueue: true }) : redis.duplicate({ enableOfflineQueue: true });
        subscriber.on('error', () => undefined); // reconnects on its own; the main connection logs Redis errors
        subscriber.on('message', (channel: string, accountId: string) => {
          if (channel === this.channel) this.deps.cache.evictAccount(accountId);
        });
        const stopped = new Promise<void>((resolve) => {
          if (signal.aborted) resolve();
          else signal.addEventListener('abort', () => resolve(), { once: true });
        });
        try {
          // Redis unreachable: the subscription waits (or fails and is run again), never the shutdown.
          await Promise.race([subscriber.subscribe(this.channel), stopped]);
          await stopped;
        } finally {
          subscriber.disconnect();
        }
      },
    };
  }
}
