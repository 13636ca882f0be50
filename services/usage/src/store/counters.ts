import { randomUUID } from 'node:crypto';
import { REDIS_COMMAND_DEFAULTS } from '@fcd/service-kit';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, type RedisOptions } from 'ioredis';

/**
 * Today's counters in Redis, one key per account per UTC day:
 *   <prefix>usage:{<account_id>}:<YYYY-MM-DD>
 * The hash tag keeps an account's keys in one Cluster slot. On a single Redis a batch is one Lua
 * call (one round trip) that decides and counts each item atomically, in order, so two requests of
 * one account in a batch are counted one after the other. One call per batch rather than one per
 * item took the service from about 62 to 45 µs of CPU per request (docs/benchmarks.md, 2026-11-23).
 * On a Redis Cluster a script may only touch keys of one slot, so the batch is split by slot: one
 * call per slot, sent together (ioredis pipelines the calls to each node into one write), answered
 * as one batch in the original order (docs/metering.md, "Redis Cluster").
 *
 * KEYS[i] = counter (i <= n); with a result key, KEYS[n+1] = it. ARGV[1] = the batch's count-by time
 * (Unix ms, 0 = none); ARGV[2] = how long the result key keeps this call's answer (ms, 0 = no
 * result key); ARGV[2+2i-1] = daily limit, ARGV[2+2i] = flags: 1 = hard limit, + 2 = peek (decide
 * without counting: a conditional GET that is counted later unless it ends in 304).
 * With a result key, a call made again with the same key (a retry after a lost answer or a
 * failover) returns the first answer instead of counting twice.
 * Past the count-by time, on Redis's own clock (so a script that waited behind a stalled Redis or a
 * slow network counts nothing), every item is status 3 and nothing changes.
 * Returns status, count per item: 0 = counter missing (seed it), 1 = counted, 2 = refused, 3 = too late,
 * 4 = peeked (allowed, not counted; the count is the current one).
 */
const AUTHORIZE_BATCH_LUA = `
local keepMs = tonumber(ARGV[2]) or 0
local n = #KEYS
if keepMs > 0 then
  n = n - 1
  local earlier = redis.call('GET', KEYS[n + 1])
  if earlier == 'withdrawn' then
    local late = {}
    for i = 1, n do late[2 * i - 1] = 3; late[2 * i] = 0 end
    return late
  end
  if earlier then return cjson.decode(earlier) end
end
local out = {}
local countBy = tonumber(ARGV[1]) or 0
if countBy > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > countBy then
    for i = 1, n do out[2 * i - 1] = 3; out[2 * i] = 0 end
    return out
  end
end
local counted = false
for i = 1, n do
  local c = redis.call('GET', KEYS[i])
  if not c then
    out[2 * i - 1] = 0; out[2 * i] = 0
  else
    c = tonumber(c)
    local flags = tonumber(ARGV[2 + 2 * i])
    if flags % 2 == 1 and c >= tonumber(ARGV[2 + 2 * i - 1]) then
      out[2 * i - 1] = 2; out[2 * i] = c
    elseif flags >= 2 then
      out[2 * i - 1] = 4; out[2 * i] = c
    else
      out[2 * i - 1] = 1; out[2 * i] = redis.call('INCR', KEYS[i])
      counted = true
    end
  end
end
if keepMs > 0 and counted then redis.call('SET', KEYS[n + 1], cjson.encode(out), 'PX', keepMs) end
return out
`;

/**
 * Withdraws a call whose answer was never received (Redis Cluster; the gateway answered 503): if
 * it counted, its counts are taken back (DECR, only on the counters it raised); if it never ran,
 * a marker makes it count nothing should it run late. Either way its result key then says
 * "withdrawn". KEYS = the call's counters then its result key; ARGV[1] = how long the marker stays (ms).
 * Returns the number of counts taken back.
 */
const WITHDRAW_LUA = `
local n = #KEYS - 1
local earlier = redis.call('GET', KEYS[n + 1])
local back = 0
if earlier and earlier ~= 'withdrawn' then
  local out = cjson.decode(earlier)
  for i = 1, n do
    if out[2 * i - 1] == 1 and (tonumber(redis.call('GET', KEYS[i]) or '0') > 0) then
      redis.call('DECR', KEYS[i]); back = back + 1
    end
  end
end
redis.call('SET', KEYS[n + 1], 'withdrawn', 'PX', ARGV[1])
return back
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
  /** A peek item under its limit: allowed, not counted (`count` is the current count). */
  | { kind: 'peeked'; count: number }
  | { kind: 'refused'; count: number }
  /** The batch's count-by time had passed when Redis ran the script: not counted. */
  | { kind: 'too_late' }
  /**
   * Redis Cluster only: this item's slot did not answer (its node down, a failover not finished)
   * while other slots of the batch did. Not counted, unless its replica took over with the count
   * and the answer was lost; then the count stands and the request is answered 503.
   */
  | { kind: 'unavailable' };

export interface CounterItem {
  accountId: string;
  day: string;
  limit: number;
  hard: boolean;
  /** Decide without counting (a conditional GET; docs/metering.md, "Conditional GETs"). */
  peek?: boolean;
}

type AuthorizeScript = (keyCount: number, ...keysThenArgs: Array<string | number>) => Promise<number[]>;
type WithScripts<T> = T & {
  fcdAuthorizeBatch: AuthorizeScript;
  fcdWithdraw: AuthorizeScript;
  fcdRaise(key: string, value: number): Promise<number>;
};
type ScriptPipeline = {
  fcdAuthorizeBatch(keyCount: number, ...keysThenArgs: Array<string | number>): ScriptPipeline;
  fcdRaise(key: string, value: number): ScriptPipeline;
  wait(replicas: number, timeoutMs: number): ScriptPipeline;
  exec(): Promise<Array<[Error | null, unknown]> | null>;
};

export type RedisClient = Redis | Cluster;

export interface CounterStoreOptions {
  /** Seconds a day's counter lives after it was seeded (covers the day plus late flushes). */
  ttlSeconds?: number;
  /**
   * Redis Cluster: replicas that must hold a slot's counts before they are answered (WAIT after
   * each call; 0 = do not wait). With 1, a primary lost with SIGKILL loses no count that was
   * answered: the replica that takes over has it.
   */
  waitReplicas?: number;
  /** Redis Cluster: pause between attempts of a slot's call that failed (a failover), within the count-by time. */
  retryDelayMs?: number;
  /** Redis Cluster: attempts of a slot's call without a count-by time. */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Redis Cluster: a call given up on was withdrawn (`back` counts taken back), or could not be. */
  onWithdraw?: (result: { back: number } | { error: Error }) => void;
}

/** How long a call's answer stays in Redis for a retry of the same call (ms). */
const ANSWER_KEEP_MS = 60_000;

export class CounterStore {
  private readonly redis: WithScripts<RedisClient>;
  readonly cluster: boolean;
  private readonly ttlSeconds: number;
  private readonly waitReplicas: number;
  private readonly retryDelayMs: number;
  private readonly maxAttempts: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly onWithdraw: CounterStoreOptions['onWithdraw'];
  /** Withdrawals under way (tests and shutdown wait for them). */
  readonly withdrawals = new Set<Promise<void>>();

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
    options: CounterStoreOptions | number = {},
  ) {
    const opts = typeof options === 'number' ? { ttlSeconds: options } : options;
    redis.defineCommand('fcdAuthorizeBatch', { lua: AUTHORIZE_BATCH_LUA });
    redis.defineCommand('fcdRaise', { numberOfKeys: 1, lua: RAISE_LUA });
    redis.defineCommand('fcdWithdraw', { lua: WITHDRAW_LUA });
    this.redis = redis as WithScripts<RedisClient>;
    this.cluster = redis instanceof Cluster;
    this.ttlSeconds = opts.ttlSeconds ?? 3 * 86_400;
    this.waitReplicas = this.cluster ? (opts.waitReplicas ?? 1) : 0;
    this.retryDelayMs = opts.retryDelayMs ?? 100;
    this.maxAttempts = opts.maxAttempts ?? 20;
    this.sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.onWithdraw = opts.onWithdraw;
  }

  key(accountId: string, day: string): string {
    return `${this.prefix}usage:{${accountId}}:${day}`;
  }

  parseKey(key: string): { accountId: string; day: string } | undefined {
    const m = /usage:\{([^}]+)\}:(\d{4}-\d{2}-\d{2})$/.exec(key);
    return m ? { accountId: m[1] as string, day: m[2] as string } : undefined;
  }

  /**
   * Decide-and-count every item, in order, unless Redis runs it after `countBy` (Unix ms; 0 = no
   * limit). Single Redis: one Lua call, which throws when Redis is unreachable. Redis Cluster: one
   * call per slot, all sent at once; throws only when no slot answered (otherwise the items of the
   * slots that did not are `unavailable`).
   */
  async authorize(items: CounterItem[], countBy = 0): Promise<CounterOutcome[]> {
    if (items.length === 0) return [];
    const when = Math.max(0, Math.trunc(countBy));
    if (!this.cluster) return this.callGroup(items, when);
    const bySlot = new Map<number, number[]>();
    items.forEach((it, i) => {
      const slot = calculateSlot(this.key(it.accountId, it.day));
      const group = bySlot.get(slot);
      if (group) group.push(i);
      else bySlot.set(slot, [i]);
    });
    const out: CounterOutcome[] = new Array(items.length);
    const settled = await Promise.allSettled(
      [...bySlot.values()].map(async (indices) => {
        const outcomes = await this.callGroupInCluster(
          indices.map((i) => items[i] as CounterItem),
          when,
        );
        indices.forEach((i, j) => {
          out[i] = outcomes[j] as CounterOutcome;
        });
      }),
    );
    const failed = settled.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed.length === settled.length) throw failed[0]?.reason;
    for (let i = 0; i < out.length; i++) out[i] ??= { kind: 'unavailable' };
    return out;
  }

  private args(items: CounterItem[], countBy: number, answerKey?: string): Array<string | number> {
    const args: Array<string | number> = items.map((it) => this.key(it.accountId, it.day));
    if (answerKey) args.push(answerKey);
    args.push(countBy, answerKey ? ANSWER_KEEP_MS : 0);
    for (const it of items) args.push(it.limit, (it.hard ? 1 : 0) + (it.peek ? 2 : 0));
    return args;
  }

  private decode(items: CounterItem[], flat: number[]): CounterOutcome[] {
    return items.map((_, i) => {
      const status = flat[2 * i];
      const count = flat[2 * i + 1] as number;
      if (status === 0) return { kind: 'needs_seed' };
      if (status === 3) return { kind: 'too_late' };
      if (status === 4) return { kind: 'peeked', count };
      return status === 1 ? { kind: 'counted', count } : { kind: 'refused', count };
    });
  }

  private async callGroup(items: CounterItem[], countBy: number): Promise<CounterOutcome[]> {
    const args = this.args(items, countBy);
    return this.decode(items, await this.redis.fcdAuthorizeBatch(items.length, ...args));
  }

  /**
   * One slot's items on a Redis Cluster. The call carries a key of its own (in the same slot) under
   * which Redis keeps its answer: a call made again after an error (a lost connection, a failover
   * under way) answers what the first one counted, or counts now if the first never ran or was
   * lost with its primary before it reached a replica. After the call, WAIT: an answer is used
   * only once `waitReplicas` replicas have the counts, so a replica that takes over has every
   * count that was answered. Attempts go on until the count-by time (then the script itself
   * answers "too late" for anything it had not counted).
   */
  private async callGroupInCluster(items: CounterItem[], countBy: number): Promise<CounterOutcome[]> {
    const first = items[0] as CounterItem;
    const answerKey = `${this.prefix}usage:{${first.accountId}}:answer:${randomUUID()}`;
    const slot = calculateSlot(answerKey);
    const args = this.args(items, countBy, answerKey);
    let lastError: unknown;
    for (let attempt = 1; ; attempt++) {
      try {
        const cluster = this.redis as Cluster;
        // Replicas the slot's primary has now (the cluster's view, refreshed every 2 s; a failed
        // replica is not listed): a primary that lost its replica, or a replica that took over and
        // has none yet, keeps serving its slots.
        const replicas = Math.min(this.waitReplicas, Math.max(0, (cluster.slots[slot]?.length ?? 1) - 1));
        const pipeline = cluster.pipeline() as unknown as ScriptPipeline;
        pipeline.fcdAuthorizeBatch(items.length + 1, ...args);
        if (replicas > 0) {
          const left = countBy > 0 ? countBy - Date.now() : 1000;
          pipeline.wait(replicas, Math.max(10, Math.min(1000, left)));
        }
        const results = (await pipeline.exec()) ?? [];
        const [scriptErr, flat] = results[0] ?? [new Error('no answer from Redis'), undefined];
        if (scriptErr) throw scriptErr;
        const outcomes = this.decode(items, flat as number[]);
        if (replicas > 0 && outcomes.some((o) => o.kind === 'counted')) {
          const [waitErr, acked] = results[1] ?? [new Error('no answer to WAIT'), undefined];
          if (waitErr) throw waitErr;
          if ((acked as number) < replicas) throw new Error(`counts reached ${acked} of ${replicas} replicas`);
        }
        if (countBy > 0 && Date.now() > countBy && outcomes.some((o) => o.kind === 'counted')) {
          // Counted in time on Redis's clock, but the answer is back after the count-by time: it
          // may reach the gateway after its deadline (a 503), so the call is withdrawn instead.
          lastError = new Error('answer came back after the count-by time');
          break;
        }
        return outcomes;
      } catch (err) {
        lastError = err;
      }
      const more = countBy > 0 ? Date.now() + this.retryDelayMs < countBy : attempt < this.maxAttempts;
      if (!more) break;
      await this.sleep(this.retryDelayMs);
    }
    // The call may have counted (its answer lost with a primary, not yet on a replica, or back too
    // late) and its items are answered 503: its counts are taken back once the slot answers again.
    const withdrawal = this.withdraw(items, answerKey).finally(() => this.withdrawals.delete(withdrawal));
    this.withdrawals.add(withdrawal);
    throw lastError;
  }

  /** Retries the withdrawal of a call until its slot answers, for as long as its result key is kept. */
  private async withdraw(items: CounterItem[], answerKey: string): Promise<void> {
    const keys = [...items.map((it) => this.key(it.accountId, it.day)), answerKey];
    const until = Date.now() + ANSWER_KEEP_MS / 2;
    for (;;) {
      try {
        const back = Number(await this.redis.fcdWithdraw(keys.length, ...keys, ANSWER_KEEP_MS));
        this.onWithdraw?.({ back });
        return;
      } catch (err) {
        if (Date.now() > until) {
          this.onWithdraw?.({ error: err as Error });
          return;
        }
        await this.sleep(Math.max(this.retryDelayMs, 200));
      }
    }
  }

  /** Seeds counters that are missing (after a new day, or a Redis flush/restart). Never lowers a counter. */
  async seed(entries: Array<{ accountId: string; day: string; count: number }>): Promise<void> {
    if (this.cluster) {
      // Keys of many slots: one command each, pipelined per node by ioredis (enableAutoPipelining).
      await Promise.all(entries.map((e) => this.redis.set(this.key(e.accountId, e.day), e.count, 'EX', this.ttlSeconds, 'NX')));
      return;
    }
    const pipeline = this.redis.pipeline();
    for (const e of entries) pipeline.set(this.key(e.accountId, e.day), e.count, 'EX', this.ttlSeconds, 'NX');
    const results = await pipeline.exec();
    for (const [err] of results ?? []) if (err) throw err;
  }

  /** After counting in Postgres (fail-open), lifts counters Redis kept through the outage to the exact count. */
  async raise(entries: Array<{ accountId: string; day: string; count: number }>): Promise<void> {
    if (this.cluster) {
      await Promise.all(entries.map((e) => this.redis.fcdRaise(this.key(e.accountId, e.day), e.count)));
      return;
    }
    const pipeline = this.redis.pipeline() as unknown as ScriptPipeline;
    for (const e of entries) pipeline.fcdRaise(this.key(e.accountId, e.day), e.count);
    const results = await pipeline.exec();
    for (const [err] of results ?? []) if (err) throw err;
  }

  async get(accountId: string, day: string): Promise<number | undefined> {
    const v = await this.redis.get(this.key(accountId, day));
    return v === null ? undefined : Number(v);
  }

  /** Every counter of this prefix (for reconciliation into Postgres); on a Cluster, of every primary. */
  async scanAll(): Promise<Array<{ accountId: string; day: string; count: number }>> {
    const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    const out: Array<{ accountId: string; day: string; count: number }> = [];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${this.prefix}usage:{*}:????-??-??`, 'COUNT', 500);
        cursor = next;
        if (keys.length === 0) continue;
        // One node, keys of many slots: GETs in one pipeline (MGET would be refused across slots).
        const pipeline = node.pipeline();
        for (const k of keys) pipeline.get(k);
        const values = (await pipeline.exec()) ?? [];
        keys.forEach((k, i) => {
          const parsed = this.parseKey(k);
          const [err, v] = values[i] ?? [null, null];
          if (parsed && !err && v !== null && v !== undefined) out.push({ ...parsed, count: Number(v) });
        });
      } while (cursor !== '0');
    }
    return out;
  }

  /**
   * Single Redis: PING. Cluster: CLUSTER INFO of one node says `cluster_state:ok` (false while a
   * primary is lost and its replica has not taken over: the cluster then refuses its slots).
   */
  async ping(): Promise<void> {
    if (this.redis instanceof Cluster) {
      const info = String(await this.redis.cluster('INFO'));
      if (!/^cluster_state:ok\r?$/m.test(info)) throw new Error('Redis Cluster state is not ok');
      return;
    }
    await this.redis.ping();
  }
}

/** Credentials and TLS (`redisOptions(config)`) override what the URL says. */
export function createRedis(url: string, auth: RedisOptions = {}): Redis {
  return new Redis(url, {
    ...auth,
    ...REDIS_COMMAND_DEFAULTS,
    enableOfflineQueue: false,
    lazyConnect: false,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  });
}
