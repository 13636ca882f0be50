import { Redis, type RedisOptions } from 'ioredis';

/**
 * Today's counters in Redis, one key per account per UTC day:
 *   <prefix>usage:{<account_id>}:<YYYY-MM-DD>
 * The hash tag keeps an account's keys in one Cluster slot. A batch is one Lua
 * call (one round trip) that decides and counts each item atomically, in order,
 * so two requests of one account in a batch are counted one after the other.
 * One call per batch rather than one per item took the service from about 62 to
 * 45 µs of CPU per request (docs/benchmarks.md, 2026-11-23). Its keys span slots,
 * so Redis Cluster would need the batch split by slot (docs/metering.md).
 *
 * KEYS[i] = counter; ARGV[2i-1] = daily limit, ARGV[2i] = '1' for a hard limit; ARGV[2n+1] = the
 * batch's count-by time (Unix ms, 0 = none). Past it, on Redis's own clock (so a script that waited
 * behind a stalled Redis or a slow network counts nothing), every item is status 3 and nothing changes.
 * Returns status, count per item: 0 = counter missing (seed it), 1 = counted, 2 = refused, 3 = too late.
 */
const AUTHORIZE_BATCH_LUA = `
local out = {}
local n = #KEYS
local countBy = tonumber(ARGV[2 * n + 1]) or 0
if countBy > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > countBy then
    for i = 1, n do out[2 * i - 1] = 3; out[2 * i] = 0 end
    return out
  end
end
for i = 1, n do
  local c = redis.call('GET', KEYS[i])
  if not c then
    out[2 * i - 1] = 0; out[2 * i] = 0
  else
    c = tonumber(c)
    if ARGV[2 * i] == '1' and c >= tonumber(ARGV[2 * i - 1]) then
      out[2 * i - 1] = 2; out[2 * i] = c
    else
      out[2 * i - 1] = 1; out[2 * i] = redis.call('INCR', KEYS[i])
    end
  end
end
return out
`;

/** Raises an existing counter to at least ARGV[1] (never lowers it, never creates it). */
const RAISE_LUA = `
local c = redis.call('GET', KEYS[1])
if c and tonumber(c) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL') end
return 1
`;

export type CounterOutcome =
  | { kind: 'needs_seed' }
  | { kind: 'counted'; count: number }
  | { kind: 'refused'; count: number }
  /** The batch's count-by time had passed when Redis ran the script: not counted. */
  | { kind: 'too_late' };

export interface CounterItem {
  accountId: string;
  day: string;
  limit: number;
  hard: boolean;
}

type RedisWithScript = Redis & {
  fcdAuthorizeBatch(keyCount: number, ...keysThenArgs: Array<string | number>): Promise<number[]>;
  fcdRaise(key: string, value: number): Promise<number>;
};

export class CounterStore {
  private readonly redis: RedisWithScript;

  constructor(
    redis: Redis,
    private readonly prefix: string,
    /** Seconds a day's counter lives after it was seeded (covers the day plus late flushes). */
    private readonly ttlSeconds = 3 * 86_400,
  ) {
    redis.defineCommand('fcdAuthorizeBatch', { lua: AUTHORIZE_BATCH_LUA });
    redis.defineCommand('fcdRaise', { numberOfKeys: 1, lua: RAISE_LUA });
    this.redis = redis as RedisWithScript;
  }

  key(accountId: string, day: string): string {
    return `${this.prefix}usage:{${accountId}}:${day}`;
  }

  parseKey(key: string): { accountId: string; day: string } | undefined {
    const m = /usage:\{([^}]+)\}:(\d{4}-\d{2}-\d{2})$/.exec(key);
    return m ? { accountId: m[1] as string, day: m[2] as string } : undefined;
  }

  /**
   * One Lua call: decide-and-count every item, in order, unless Redis runs it after `countBy`
   * (Unix ms; 0 = no limit). Throws when Redis is unreachable.
   */
  async authorize(items: CounterItem[], countBy = 0): Promise<CounterOutcome[]> {
    if (items.length === 0) return [];
    const args: Array<string | number> = items.map((it) => this.key(it.accountId, it.day));
    for (const it of items) args.push(it.limit, it.hard ? '1' : '0');
    args.push(Math.max(0, Math.trunc(countBy)));
    const flat = await this.redis.fcdAuthorizeBatch(items.length, ...args);
    return items.map((_, i) => {
      const status = flat[2 * i];
      const count = flat[2 * i + 1] as number;
      if (status === 0) return { kind: 'needs_seed' };
      if (status === 3) return { kind: 'too_late' };
      return status === 1 ? { kind: 'counted', count } : { kind: 'refused', count };
    });
  }

  /** Seeds counters that are missing (after a new day, or a Redis flush/restart). Never lowers a counter. */
  async seed(entries: Array<{ accountId: string; day: string; count: number }>): Promise<void> {
    const pipeline = this.redis.pipeline();
    for (const e of entries) pipeline.set(this.key(e.accountId, e.day), e.count, 'EX', this.ttlSeconds, 'NX');
    const results = await pipeline.exec();
    for (const [err] of results ?? []) if (err) throw err;
  }

  /** After counting in Postgres (fail-open), lifts counters Redis kept through the outage to the exact count. */
  async raise(entries: Array<{ accountId: string; day: string; count: number }>): Promise<void> {
    const pipeline = this.redis.pipeline() as unknown as {
      fcdRaise(...a: unknown[]): void;
      exec(): Promise<Array<[Error | null, unknown]> | null>;
    };
    for (const e of entries) pipeline.fcdRaise(this.key(e.accountId, e.day), e.count);
    const results = await pipeline.exec();
    for (const [err] of results ?? []) if (err) throw err;
  }

  async get(accountId: string, day: string): Promise<number | undefined> {
    const v = await this.redis.get(this.key(accountId, day));
    return v === null ? undefined : Number(v);
  }

  /** Every counter of this prefix (for reconciliation into Postgres). */
  async scanAll(): Promise<Array<{ accountId: string; day: string; count: number }>> {
    const out: Array<{ accountId: string; day: string; count: number }> = [];
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}usage:{*}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) {
        const values = await this.redis.mget(...keys);
        keys.forEach((k, i) => {
          const parsed = this.parseKey(k);
          const v = values[i];
          if (parsed && v !== null && v !== undefined) out.push({ ...parsed, count: Number(v) });
        });
      }
    } while (cursor !== '0');
    return out;
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }
}

/** Credentials and TLS (`redisOptions(config)`) override what the URL says. */
export function createRedis(url: string, auth: RedisOptions = {}): Redis {
  return new Redis(url, {
    ...auth,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 2000,
    lazyConnect: false,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  });
}
