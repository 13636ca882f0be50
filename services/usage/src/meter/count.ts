import type { Clock } from '@fcd/service-kit';
import type { Logger } from 'pino';
import { decidePeek, type SettledCount } from '../domain/meter-decision';
import type { UsageMetrics } from '../metrics';
import type { AccountStore } from '../store/accounts';
import type { CounterItem, CounterOutcome, CounterStore } from '../store/counters';
import { pairKey, type WriteBehind } from './write-behind';

export interface CountDeps {
  accounts: AccountStore;
  counters: CounterStore;
  clock: Clock;
  logger: Logger;
  metrics: UsageMetrics;
  /** Operator opt-in: when Redis is down, count in Postgres instead of refusing with 503. */
  failOpen: boolean;
  writeBehind: WriteBehind;
}

type Outcome = CounterOutcome | 'unavailable';

const settled = (o: Outcome): SettledCount | 'unavailable' =>
  o === 'unavailable' || o.kind === 'needs_seed' || o.kind === 'too_late' || o.kind === 'unavailable' ? 'unavailable' : o;

/**
 * Decide-and-count of a batch in Redis (one Lua call per batch, or per slot on a
 * Cluster); missing counters are seeded from Postgres (and the unflushed
 * counts) and those items retried. Fail-open, counting falls back to Postgres
 * while Redis is down, and Redis's counters are raised to the exact count
 * once it is back.
 */
export class Counting {
  /** (account, day) pairs counted in Postgres during a Redis outage (fail-open), to lift in Redis after it. */
  private readonly failOpenPairs = new Map<string, { accountId: string; day: string }>();

  constructor(private readonly deps: CountDeps) {}

  /**
   * On a Redis Cluster some slots may answer and others not (a primary lost, its failover under
   * way): the items of those that did not are unavailable (or, fail-open, counted in Postgres).
   */
  async count(items: CounterItem[], countBy: number): Promise<Array<SettledCount | 'unavailable'>> {
    const { counters, logger, metrics } = this.deps;
    let outcomes: Outcome[];
    try {
      if (this.failOpenPairs.size > 0) await this.liftAfterFailOpen();
      outcomes = await counters.authorize(items, countBy);
    } catch (err) {
      metrics.storeErrors.inc({ store: 'redis' });
      logger.warn({ err: { message: (err as Error).message } }, 'counter store unavailable');
      return this.deps.failOpen ? this.countInDatabase(items, countBy) : items.map(() => 'unavailable');
    }
    await this.seedAndRetry(items, outcomes, countBy);
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
          outcomes[i] = counted[j] as Outcome;
        });
      }
    }
    return outcomes.map(settled);
  }

  /** Seeds the missing counters from Postgres and the unflushed counts, and retries those items (up to 3 rounds); in place. */
  private async seedAndRetry(items: CounterItem[], outcomes: Outcome[], countBy: number): Promise<void> {
    const { counters, accounts, logger, metrics, writeBehind } = this.deps;
    for (let round = 0; round < 3; round++) {
      const seedIdx = outcomes.flatMap((o, i) => (o !== 'unavailable' && o.kind === 'needs_seed' ? [i] : []));
      if (seedIdx.length === 0) break;
      try {
        const pairs = [...new Map(seedIdx.map((i) => [pairKey(items[i]!.accountId, items[i]!.day), items[i]!])).values()];
        const stored = await accounts.dailyCounts(pairs);
        await counters.seed(
          pairs.map((p) => {
            const k = pairKey(p.accountId, p.day);
            return { accountId: p.accountId, day: p.day, count: Math.max(stored.get(k) ?? 0, writeBehind.get(p.accountId, p.day) ?? 0) };
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
  }

  /** Fail-open: exact atomic counting in Postgres while Redis is down (logged and counted in metrics). */
  private async countInDatabase(items: CounterItem[], countBy: number): Promise<Array<SettledCount | 'unavailable'>> {
    const { accounts, logger, metrics } = this.deps;
    logger.warn({ items: items.length }, 'fail-open: counting in postgres while redis is unavailable');
    // Postgres must hold every count this replica has seen before it becomes the counter.
    await this.deps.writeBehind.flush().catch(() => undefined);
    const out: Array<SettledCount | 'unavailable'> = [];
    for (const it of items) {
      if (countBy > 0 && this.deps.clock.now() > countBy) {
        out.push('unavailable'); // past the batch's deadline: not counted
        continue;
      }
      try {
        if (it.peek) {
          const stored = await accounts.dailyCounts([it]);
          out.push(decidePeek(stored.get(pairKey(it.accountId, it.day)) ?? 0, it.limit, it.hard));
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
}
