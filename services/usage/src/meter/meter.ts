import type { Clock } from '@fcd/service-kit';
import type { Logger } from 'pino';
import type { KeyCache } from '../domain/key-cache';
import { decide, type MeterResult, meterWindow, type UsageReport, unauthenticated, unavailable } from '../domain/meter-decision';
import type { KeyPrincipal } from '../domain/tiers';
import type { UsageMetrics } from '../metrics';
import { principalsOf } from '../portal/principals';
import type { PortalStore } from '../portal/store';
import { credentialDigest } from '../portal/tokens';
import type { AccountStore } from '../store/accounts';
import type { CounterStore } from '../store/counters';
import { Counting } from './count';
import { PostgresHealth } from './postgres-health';
import { UsageReports } from './report';
import { WriteBehind } from './write-behind';

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

export interface MeterDeps {
  accounts: AccountStore;
  /** Portal sessions, resolved like keys (docs/api.md, "Portal"); without it, a session token is unknown. */
  sessions?: PortalStore;
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

type Lookup = KeyPrincipal | null | 'unavailable';

/**
 * fcd_rate_limit_decisions_total for a batch: one increment per (tier, outcome) present, by the
 * number of its items, rather than one per item (each hashes its labels in prom-client).
 */
function countDecisions(metrics: UsageMetrics, results: MeterResult[]): void {
  const counts = new Map<string, { tier: string; outcome: string; n: number }>();
  for (const r of results) {
    const tier = r.principal?.tier ?? 'none';
    const key = `${tier}\0${r.decision}`;
    const c = counts.get(key);
    if (c) c.n++;
    else counts.set(key, { tier, outcome: r.decision, n: 1 });
  }
  for (const { tier, outcome, n } of counts.values()) metrics.decisions.inc({ tier, outcome }, n);
}

/**
 * Authenticates and meters batches of requests: one key lookup per unknown key
 * (then cached), one Redis Lua call per batch (`Counting`), the decision per
 * request (`decide`, pure), and a batched, idempotent flush of counters to
 * Postgres (`WriteBehind`).
 */
export class UsageMeter {
  private readonly postgres: PostgresHealth;
  private readonly writeBehind: WriteBehind;
  private readonly counting: Counting;
  private readonly reports: UsageReports;
  private keyInvalidation: { publish(accountId: string): Promise<void> } | undefined;

  constructor(private readonly deps: MeterDeps) {
    this.postgres = new PostgresHealth(deps, deps.postgresRetryMs ?? 1000);
    this.writeBehind = new WriteBehind(deps);
    this.counting = new Counting({ ...deps, writeBehind: this.writeBehind });
    this.reports = new UsageReports({ ...deps, postgres: this.postgres, writeBehind: this.writeBehind });
  }

  async authorize(requests: Array<string | MeterRequest>, options: MeterOptions = {}): Promise<MeterResult[]> {
    const items = requests.map((r) => (typeof r === 'string' ? { apiKey: r } : r));
    const { clock, metrics } = this.deps;
    const now = clock.now();
    const window = meterWindow(now);
    const countBy = options.countBy ?? 0;
    const tooLate = () => countBy > 0 && clock.now() > countBy;
    const principals: Lookup[] = tooLate() ? items.map(() => 'unavailable') : await this.resolve(items.map((i) => i.apiKey));
    const results = principals.map((p) => (p === 'unavailable' ? unavailable(window) : unauthenticated(window)));
    // A revoked key, or one past its expiry (a rolled key's old half), is refused like an unknown one.
    const toCount = principals.flatMap((p, index) =>
      p && p !== 'unavailable' && !p.revoked && !(p.expiresAt != null && p.expiresAt <= now) ? [{ index, principal: p }] : [],
    );
    for (const { principal } of toCount) this.writeBehind.used(principal.keyId, now);
    if (toCount.length > 0) {
      const counterItems = toCount.map(({ index, principal }) => ({
        accountId: principal.accountId,
        day: window.day,
        limit: principal.dailyLimit,
        hard: principal.hardLimit,
        peek: items[index]?.peek === true,
      }));
      const outcomes = tooLate() ? counterItems.map(() => 'unavailable' as const) : await this.counting.count(counterItems, countBy);
      outcomes.forEach((outcome, i) => {
        const { index, principal } = toCount[i] as { index: number; principal: KeyPrincipal };
        if (outcome !== 'unavailable' && outcome.kind === 'counted')
          this.writeBehind.remember(principal.accountId, window.day, outcome.count);
        results[index] = decide(principal, outcome, window);
      });
    }
    await this.attachReports(results, items, now);
    metrics.batchSize.observe(items.length);
    countDecisions(metrics, results);
    return results;
  }

  /** The usage report of each allowed request that asked for one (a failed report leaves it out). */
  private async attachReports(results: MeterResult[], items: MeterRequest[], now: number): Promise<void> {
    await Promise.all(
      results.map(async (r, i) => {
        if (r.decision !== 'allowed' || !items[i]?.includeUsage || !r.principal) return;
        try {
          r.usage = await this.reports.report(r.principal, r.count, now);
        } catch (err) {
          this.deps.logger.warn({ err: { message: (err as Error).message } }, 'usage report failed');
        }
      }),
    );
  }

  /** Key → principal (or null when malformed/unknown), from the cache or one query for all misses. */
  private async resolve(apiKeys: string[]): Promise<Lookup[]> {
    const { cache, metrics } = this.deps;
    const digests = apiKeys.map(credentialDigest);
    const out: Lookup[] = digests.map((d) => (d === undefined ? null : (cache.get(d) ?? null)));
    const misses = [...new Set(digests.filter((d, i): d is string => d !== undefined && cache.get(d) === undefined && out[i] === null))];
    if (misses.length === 0) return out;
    try {
      if (this.postgres.down()) throw new Error('postgres unavailable (retrying shortly)');
      const found = await principalsOf(this.deps, misses);
      for (const d of misses) cache.set(d, found.get(d) ?? null);
      digests.forEach((d, i) => {
        if (d !== undefined && misses.includes(d)) out[i] = found.get(d) ?? null;
      });
    } catch (err) {
      if (!this.postgres.down()) this.postgres.failed(err, 'key lookup');
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

  pendingCount(): number {
    return this.writeBehind.size();
  }

  /** Writes the highest counts seen since the last flush; on failure they are kept for the next one. */
  flush(): Promise<number> {
    return this.writeBehind.flush();
  }

  /** Copies every counter in Redis into Postgres (see `WriteBehind.reconcile`). */
  reconcile(): Promise<number> {
    return this.writeBehind.reconcile();
  }

  /** The meter's clock (key management decides expiries on it). */
  now(): number {
    return this.deps.clock.now();
  }

  /** An account's keys changed (revoked, rolled): its cached keys are looked up again on their next use, on every replica. */
  async keysChanged(accountId: string): Promise<void> {
    this.deps.cache.evictAccount(accountId);
    await this.keyInvalidation?.publish(accountId);
  }

  /** Tells every replica when an account's keys change (Redis pub/sub); without it, only this replica's cache is dropped. */
  useKeyInvalidation(invalidation: { publish(accountId: string): Promise<void> }): void {
    this.keyInvalidation = invalidation;
  }

  /** The portal sessions this meter resolves like keys (PortalService serves them; grpc/server.ts). */
  get sessions(): PortalStore | undefined {
    return this.deps.sessions;
  }

  /** Usage of an account without counting a request (unary GetUsage). */
  usage(accountId: string): Promise<UsageReport | undefined> {
    return this.reports.usage(accountId);
  }

  /** Each day's count and overage over a range (unary GetDailyUsage). */
  dailyUsage(accountId: string, query: { from?: string; to?: string }) {
    return this.reports.daily(accountId, query);
  }
}
