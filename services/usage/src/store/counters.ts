import { randomUUID } from 'node:crypto';
import { REDIS_COMMAND_DEFAULTS } from '@fcd/service-kit';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { AUTHORIZE_BATCH_LUA, RAISE_LUA, WITHDRAW_LUA } from './counter-scripts';

/**
 * Today's counters in Redis, one key per account per UTC day:
 *   <prefix>usage:{<account_id>}:<YYYY-MM-DD>
 * The hash tag keeps an account's keys in one Cluster slot. On a single Redis a batch is one Lua
 * call (one round trip) that decides and counts each item atomically, in order, so two requests of
 * one account in a batch are counted one after the other. One call per batch rather than one per
 * item took the service from about 62 to 45 µs of CPU per request
 * (docs/benchmarks/history/2026-11-23.md, "Metered hot path").
 * On a Redis Cluster a script may only touch keys of one slot, so the batch is split by slot: one
 * call per slot, sent together (ioredis pipelines the calls to each node into one write), answered
 * as one batch in the original order (docs/metering.md, "Redis Cluster").
 */

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
