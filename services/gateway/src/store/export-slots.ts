import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/**
 * Export slots: at most `limit` bulk exports of one account at once, across every gateway replica
 * (docs/api.md, "Bulk export"). One sorted set per account in Redis, `<prefix>exports:{<account>}`:
 * a member per running export, scored by the end of its lease (Redis's own clock, so replicas'
 * clocks do not matter). Taking a slot first drops the lapsed leases, then adds one if fewer than
 * `limit` remain. The gateway renews each of its leases every third of the TTL while the export
 * runs and removes it when the response closes; a gateway that crashed stops renewing, and its
 * slots lapse within the TTL.
 */
const ACQUIRE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`;

/** Extends a lease still held (1), or says it lapsed (0). */
const RENEW_LUA = `
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

type RedisWithSlots = (Redis | Cluster) & {
  fcdExportAcquire(key: string, lease: string, limit: number, ttlMs: number): Promise<number>;
  fcdExportRenew(key: string, lease: string, ttlMs: number): Promise<number>;
};

/** A slot held by one export; `release` is idempotent. */
export interface ExportSlot {
  release(): void;
}

export class ExportSlots {
  private readonly redis: RedisWithSlots;

  constructor(
    redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly ttlMs: number,
    private readonly onError: (err: unknown) => void,
  ) {
    redis.defineCommand('fcdExportAcquire', { numberOfKeys: 1, lua: ACQUIRE_LUA });
    redis.defineCommand('fcdExportRenew', { numberOfKeys: 1, lua: RENEW_LUA });
    this.redis = redis as RedisWithSlots;
  }

  private key(accountId: string): string {
    return `${this.prefix}exports:{${accountId}}`;
  }

  /** A slot of the account's `limit`, or null when all are taken. Throws when Redis is unreachable. */
  async acquire(accountId: string, limit: number): Promise<ExportSlot | null> {
    const key = this.key(accountId);
    const lease = randomUUID();
    if ((await this.redis.fcdExportAcquire(key, lease, limit, this.ttlMs)) !== 1) return null;
    const renewal = setInterval(
      () => {
        this.redis.fcdExportRenew(key, lease, this.ttlMs).catch(this.onError);
      },
      Math.floor(this.ttlMs / 3),
    );
    renewal.unref();
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        clearInterval(renewal);
        // A release that fails (Redis down) lapses with the lease.
        this.redis.zrem(key, lease).catch(this.onError);
      },
    };
  }
}
