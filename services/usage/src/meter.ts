import { type Clock, isoTimestamp, nextUtcMidnight, utcDay } from '@fcd/service-kit';
import type { Logger } from 'pino';
import { digestApiKey, isWellFormedKey } from './domain/api-key';
import { type BillingFigures, computeBilling, type DayCount, monthBounds } from './domain/billing';
import type { KeyCache } from './domain/key-cache';
import type { KeyPrincipal } from './domain/tiers';
import type { UsageMetrics } from './metrics';
import type { AccountStore } from './store/accounts';
import type { CounterItem, CounterOutcome, CounterStore } from './store/counters';

export type Decision = 'allowed' | 'unauthenticated' | 'rate_limited' | 'unavailable';

export interface MeterResult {
  decision: Decision;
  principal?: KeyPrincipal;
  count: number;
  remaining: number;
  resetsAt: string;
  retryAfterSeconds: number;
  /** For allowed requests that asked for it: the usage report, this request included. */
  usage?: UsageReport;
}

export interface MeterOptions {
  /**
   * Unix ms after which the batch must not be counted (the deadline travelling with it; 0 = none).
   * Checked before each store call and, on Redis's clock, inside the counting script itself.
   */
  countBy?: number;
}

export interface MeterRequest {
  apiKey: string;
  includeUsage?: boolean;
  /** Authenticate and apply the hard limit without counting (a conditional GET that may end in 304). */
  peek?: boolean;
}

export interface UsageReport {
  tier: string;
  dailyLimit: number;
  today: { requestCount: number; remaining: number; resetsAt: string };
  billing: BillingFigures;
  /** Earlier days came from this replica's cache while Postgres was unreachable (today is live). */
  stale: boolean;
}

export interface MeterDeps {
  accounts: AccountStore;
  counters: CounterStore;
  cache: KeyCache;
  clock: Clock;
  logger: Logger;
  metrics: UsageMetrics;
  /** Operator opt-in: when Redis is down, count in Postgres instead of refusing with 503. */
  failOpen: boolean;
  /** How long the persisted counts of earlier days of the month are reused for usage reports. */
  reportCacheTtlMs?: number;
  /** After a failed Postgres call, how long lookups go straight to the outage fallbacks (default 1 s). */
  postgresRetryMs?: number;
}

type Settled = Exclude<CounterOutcome, { kind: 'needs_seed' } | { kind: 'too_late' } | { kind: 'unavailable' }>;

const pairKey = (accountId: string, day: string) => `${accountId}|${day}`;

/**
 * Authenticates and meters batches of requests: one key lookup per unknown key
 * (then cached), one Redis Lua call per batch, and a batched, idempotent flush
 * of counters to Postgres.
 */
export class UsageMeter {
  /** Highest count seen per (account, day) since the last flush. */
  private pending = new Map<string, { accountId: string; day: string; count: number }>();
  /** Persisted counts of the month's earlier days, per account (they change only by late flushes). */
  /** (account, day) pairs counted in Postgres during a Redis outage (fail-open), to lift in Redis after it. */
  private readonly failOpenPairs = new Map<string, { accountId: string; day: string }>();
  private readonly earlierDays = new Map<string, { month: string; today: string; days: DayCount[]; expires: number }>();

  /** Until this time (ms) Postgres is taken as unreachable: key lookups and reports use the cache. */
  private postgresDownUntil = 0;

  constructor(private readonly deps: MeterDeps) {}

  private postgresDown(): boolean {
    return this.deps.clock.now() < this.postgresDownUntil;
  }

  private postgresFailed(err: unknown, what: string): void {
    const { clock, logger, metrics } = this.deps;
    if (!this.postgresDown()) logger.warn({ err: { message: (err as Error).message } }, `${what} failed: postgres unavailable`);
    metrics.storeErrors.inc({ store: 'postgres' });
    this.postgresDownUntil = clock.now() + (this.deps.postgresRetryMs ?? 1000);
  }

  async authorize(requests: Array<string | MeterRequest>, options: MeterOptions = {}): Promise<MeterResult[]> {
    const items = requests.map((r) => (typeof r === 'string' ? { apiKey: r } : r));
    const apiKeys = items.map((i) => i.apiKey);
    const { clock, metrics } = this.deps;
    const now = clock.now();
    const day = utcDay(now);
    const resetsMs = nextUtcMidnight(now);
    const resetsAt = isoTimestamp(resetsMs);
    const secondsToReset = Math.max(1, Math.ceil((resetsMs - now) / 1000));
    const results: MeterResult[] = apiKeys.map(() => ({
      decision: 'unauthenticated',
      count: 0,
      remaining: 0,
      resetsAt,
      retryAfterSeconds: 0,
    }));

    const countBy = options.countBy ?? 0;
    const tooLate = () => countBy > 0 && clock.now() > countBy;
    const principals = tooLate() ? apiKeys.map(() => 'unavailable' as const) : await this.resolve(apiKeys);
    const toCount: Array<{ index: number; principal: KeyPrincipal; peek: boolean }> = [];
    principals.forEach((p, index) => {
      if (p === 'unavailable') {
        results[index] = { decision: 'unavailable', count: 0, remaining: 0, resetsAt, retryAfterSeconds: 1 };
      } else if (p && !p.revoked) {
        toCount.push({ index, principal: p, peek: items[index]?.peek === true });
      }
    });

    if (toCount.length > 0) {
      const counterItems = toCount.map(({ principal, peek }) => ({
        accountId: principal.accountId,
        day,
        limit: principal.dailyLimit,
        hard: principal.hardLimit,
        peek,
      }));
      const outcomes = tooLate() ? counterItems.map(() => 'unavailable' as const) : await this.count(counterItems, countBy);
      outcomes.forEach((outcome, i) => {
        const { index, principal } = toCount[i] as { index: number; principal: KeyPrincipal };
        if (outcome === 'unavailable') {
          results[index] = { decision: 'unavailable', principal, count: 0, remaining: 0, resetsAt, retryAfterSeconds: 1 };
          return;
        }
        const remaining = Math.max(0, principal.dailyLimit - outcome.count);
        if (outcome.kind === 'counted' || outcome.kind === 'peeked') {
          if (outcome.kind === 'counted') this.remember(principal.accountId, day, outcome.count);
          results[index] = { decision: 'allowed', principal, count: outcome.count, remaining, resetsAt, retryAfterSeconds: 0 };
        } else {
          results[index] = {
            decision: 'rate_limited',
            principal,
            count: outcome.count,
            remaining: 0,
            resetsAt,
            retryAfterSeconds: secondsToReset,
          };
        }
      });
    }

    await Promise.all(
      results.map(async (r, i) => {
        if (r.decision !== 'allowed' || !items[i]?.includeUsage || !r.principal) return;
        try {
          r.usage = await this.report(r.principal, r.count, now);
        } catch (err) {
          this.deps.logger.warn({ err: { message: (err as Error).message } }, 'usage report failed');
        }
      }),
    );

    metrics.batchSize.observe(apiKeys.length);
    results.forEach((r) => {
      metrics.decisions.inc({ tier: r.principal?.tier ?? 'none', outcome: r.decision });
    });
    return results;
  }

  /** Key → principal (or null when malformed/unknown), from the cache or one query for all misses. */
  private async resolve(apiKeys: string[]): Promise<Array<KeyPrincipal | null | 'unavailable'>> {
    const { cache, accounts, metrics } = this.deps;
    const digests = apiKeys.map((k) => (isWellFormedKey(k) ? digestApiKey(k) : undefined));
    const out: Array<KeyPrincipal | null | 'unavailable'> = digests.map((d) => (d === undefined ? null : (cache.get(d) ?? null)));
    const misses = [...new Set(digests.filter((d, i): d is string => d !== undefined && cache.get(d) === undefined && out[i] === null))];
    if (misses.length === 0) return out;
    try {
      if (this.postgresDown()) throw new Error('postgres unavailable (retrying shortly)');
      const found = await accounts.principalsByDigest(misses);
      for (const d of misses) cache.set(d, found.get(d) ?? null);
      digests.forEach((d, i) => {
        if (d !== undefined && misses.includes(d)) out[i] = found.get(d) ?? null;
      });
    } catch (err) {
      if (!this.postgresDown()) this.postgresFailed(err, 'key lookup');
      // A key this replica knew keeps being served while the key store is unreachable; an unknown
      // one is 503 (never 401: it may exist).
      digests.forEach((d, i) => {
        if (d === undefined || !misses.includes(d)) return;
        const known = cache.getDuringOutage(d);
        if (known) metrics.keysServedDuringOutage.inc();
        out[i] = known ?? 'unavailable';
      });
    }
    return out;
  }

  /**
   * Decide-and-count in Redis; seed missing counters from Postgres and retry those items. On a
   * Redis Cluster some slots may answer and others not (a primary lost, its failover under way):
   * the items of those that did not are unavailable (or, fail-open, counted in Postgres).
   */
  private async count(items: CounterItem[], countBy: number): Promise<Array<Settled | 'unavailable'>> {
    const { counters, accounts, logger, metrics } = this.deps;
    let outcomes: Array<CounterOutcome | 'unavailable'>;
    try {
      if (this.failOpenPairs.size > 0) await this.liftAfterFailOpen();
      outcomes = await counters.authorize(items, countBy);
    } catch (err) {
      metrics.storeErrors.inc({ store: 'redis' });
      logger.warn({ err: { message: (err as Error).message } }, 'counter store unavailable');
      return this.deps.failOpen ? this.countInDatabase(items, countBy) : items.map(() => 'unavailable');
    }
    for (let round = 0; round < 3; round++) {
      const seedIdx = outcomes.flatMap((o, i) => (o !== 'unavailable' && o.kind === 'needs_seed' ? [i] : []));
      if (seedIdx.length === 0) break;
      try {
        const pairs = [...new Map(seedIdx.map((i) => [pairKey(items[i]!.accountId, items[i]!.day), items[i]!])).values()];
        const stored = await accounts.dailyCounts(pairs);
        await counters.seed(
          pairs.map((p) => {
            const k = pairKey(p.accountId, p.day);
            return { accountId: p.accountId, day: p.day, count: Math.max(stored.get(k) ?? 0, this.pending.get(k)?.count ?? 0) };
          }),
        );
        metrics.seeds.inc(pairs.length);
        const retried = await counters.authorize(
          seedIdx.map((i) => items[i] as CounterItem),
          countBy,
        );
        seedIdx.forEach((i, j) => {
          outcomes[i] = retried[j] as CounterOutcome;
        });
      } catch (err) {
        logger.warn({ err: { message: (err as Error).message } }, 'counter seeding failed');
        for (const i of seedIdx) outcomes[i] = 'unavailable';
        break;
      }
    }
    const late = outcomes.filter((o) => o !== 'unavailable' && o.kind === 'too_late').length;
    if (late > 0) metrics.tooLate.inc(late);
    const lost = outcomes.flatMap((o, i) => (o !== 'unavailable' && o.kind === 'unavailable' ? [i] : []));
    if (lost.length > 0) {
      metrics.storeErrors.inc({ store: 'redis' });
      logger.warn({ items: lost.length }, 'counter store unavailable for part of the batch');
      if (this.deps.failOpen) {
        const counted = await this.countInDatabase(
          lost.map((i) => items[i] as CounterItem),
          countBy,
        );
        lost.forEach((i, j) => {
          outcomes[i] = counted[j] as Settled | 'unavailable';
        });
      }
    }
    return outcomes.map((o) =>
      o === 'unavailable' || o.kind === 'needs_seed' || o.kind === 'too_late' || o.kind === 'unavailable' ? 'unavailable' : o,
    );
  }

  /** Fail-open: exact atomic counting in Postgres while Redis is down (logged and counted in metrics). */
  private async countInDatabase(items: CounterItem[], countBy: number): Promise<Array<Settled | 'unavailable'>> {
    const { accounts, logger, metrics } = this.deps;
    logger.warn({ items: items.length }, 'fail-open: counting in postgres while redis is unavailable');
    // Postgres must hold every count this replica has seen before it becomes the counter.
    await this.flush().catch(() => undefined);
    const out: Array<Settled | 'unavailable'> = [];
    for (const it of items) {
      if (countBy > 0 && this.deps.clock.now() > countBy) {
        out.push('unavailable'); // past the batch's deadline: not counted
        continue;
      }
      try {
        if (it.peek) {
          const stored = await accounts.dailyCounts([it]);
          const count = stored.get(pairKey(it.accountId, it.day)) ?? 0;
          out.push(it.hard && count >= it.limit ? { kind: 'refused', count } : { kind: 'peeked', count });
          continue;
        }
        const r = await accounts.incrementInDatabase(it.accountId, it.day, it.hard ? it.limit : null);
        this.failOpenPairs.set(pairKey(it.accountId, it.day), { accountId: it.accountId, day: it.day });
        metrics.failOpen.inc();
        out.push(r.allowed ? { kind: 'counted', count: r.count } : { kind: 'refused', count: r.count });
      } catch {
        out.push('unavailable');
      }
    }
    return out;
  }

  /**
   * Redis is back after this replica counted in Postgres: counters Redis kept through the outage
   * are lower than the exact count, so they are raised to it before Redis counts again (missing
   * counters are seeded from Postgres as usual).
   */
  private async liftAfterFailOpen(): Promise<void> {
    const pairs = [...this.failOpenPairs.values()];
    const stored = await this.deps.accounts.dailyCounts(pairs);
    await this.deps.counters.raise(pairs.map((p) => ({ ...p, count: stored.get(pairKey(p.accountId, p.day)) ?? 0 })));
    for (const p of pairs) this.failOpenPairs.delete(pairKey(p.accountId, p.day));
  }

  private remember(accountId: string, day: string, count: number): void {
    const k = pairKey(accountId, day);
    const prev = this.pending.get(k);
    if (!prev || prev.count < count) this.pending.set(k, { accountId, day, count });
  }

  pendingCount(): number {
    return this.pending.size;
  }

  /** Writes the highest counts seen since the last flush; on failure they are kept for the next one. */
  async flush(): Promise<number> {
    if (this.pending.size === 0) return 0;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await this.deps.accounts.upsertDailyCounts([...batch.values()]);
      this.deps.metrics.flushed.inc(batch.size);
      return batch.size;
    } catch (err) {
      for (const v of batch.values()) this.remember(v.accountId, v.day, v.count);
      this.deps.metrics.storeErrors.inc({ store: 'postgres' });
      throw err;
    }
  }

  /**
   * Copies every counter in Redis into Postgres (GREATEST). Run at start-up and
   * periodically, so counts of a replica that died before its flush still
   * reach Postgres as long as Redis kept them.
   */
  async reconcile(): Promise<number> {
    const all = await this.deps.counters.scanAll();
    for (let i = 0; i < all.length; i += 1000) await this.deps.accounts.upsertDailyCounts(all.slice(i, i + 1000));
    return all.length;
  }

  /** Usage report of an account given today's count (taken from the counting itself). */
  private async report(p: KeyPrincipal, todayCount: number, now: number): Promise<UsageReport> {
    const today = utcDay(now);
    const { start } = monthBounds(now);
    const earlier = await this.earlierDaysOf(p.accountId, start, today);
    const days = new Map(earlier.days.map((d) => [d.day, d.count]));
    for (const q of this.pending.values()) {
      if (q.accountId === p.accountId && q.day >= start && q.day < today) days.set(q.day, Math.max(days.get(q.day) ?? 0, q.count));
    }
    days.set(today, todayCount);
    return {
      tier: p.tier,
      dailyLimit: p.dailyLimit,
      today: { requestCount: todayCount, remaining: Math.max(0, p.dailyLimit - todayCount), resetsAt: isoTimestamp(nextUtcMidnight(now)) },
      billing: computeBilling({
        nowMs: now,
        dailyLimit: p.dailyLimit,
        overageAllowed: !p.hardLimit,
        overageRateUsd: p.overageRateUsd,
        days: [...days].map(([day, count]) => ({ day, count })),
      }),
      stale: earlier.stale,
    };
  }

  /**
   * Persisted counts of the month's days before today, reused for reportCacheTtlMs. While Postgres
   * is unreachable the last figures this replica read for the same month are used, marked stale
   * (counts of days this replica saw are merged in from its unflushed counts by the caller); with
   * none for this month the report fails (503).
   */
  private async earlierDaysOf(accountId: string, monthStart: string, today: string): Promise<{ days: DayCount[]; stale: boolean }> {
    const now = this.deps.clock.now();
    if (today <= monthStart) return { days: [], stale: false };
    const cached = this.earlierDays.get(accountId);
    if (cached && cached.month === monthStart && cached.today === today && cached.expires > now) return { days: cached.days, stale: false };
    let days: DayCount[];
    try {
      if (this.postgresDown()) throw new Error('postgres unavailable (retrying shortly)');
      days = await this.deps.accounts.countsBetween(accountId, monthStart, utcDay(Date.parse(`${today}T00:00:00Z`) - 1));
    } catch (err) {
      if (!this.postgresDown()) this.postgresFailed(err, 'usage report');
      if (cached && cached.month === monthStart) return { days: cached.days, stale: true };
      throw err;
    }
    if (this.earlierDays.size > 100_000) this.earlierDays.clear();
    this.earlierDays.set(accountId, { month: monthStart, today, days, expires: now + (this.deps.reportCacheTtlMs ?? 5000) });
    return { days, stale: false };
  }

  /** Usage of an account without counting a request (unary GetUsage). */
  async usage(accountId: string): Promise<UsageReport | undefined> {
    const { accounts, counters, clock } = this.deps;
    const found = await accounts.accountWithTier(accountId);
    if (!found) return undefined;
    const now = clock.now();
    const today = utcDay(now);
    const live = await counters.get(accountId, today);
    const stored = (await accounts.dailyCounts([{ accountId, day: today }])).get(`${accountId}|${today}`) ?? 0;
    const pending = this.pending.get(pairKey(accountId, today))?.count ?? 0;
    const principal: KeyPrincipal = {
      keyId: '',
      accountId,
      tier: found.account.tier,
      tierRank: found.tier.rank,
      dailyLimit: found.account.dailyLimit,
      hardLimit: found.tier.hardLimit,
      overageRateUsd: found.tier.overageRateUsd,
      revoked: false,
    };
    return this.report(principal, Math.max(live ?? 0, stored, pending), now);
  }
}
