import { type Clock, isoTimestamp, nextUtcMidnight, utcDay } from '@fcd/service-kit';
import { computeBilling, type DayCount, monthBounds } from '../domain/billing';
import { type DailyUsage, type DayRange, dailyHistory, parseDayRange } from '../domain/daily-usage';
import type { UsageReport } from '../domain/meter-decision';
import type { KeyPrincipal } from '../domain/tiers';
import type { AccountStore } from '../store/accounts';
import type { CounterStore } from '../store/counters';
import type { PostgresHealth } from './postgres-health';
import type { WriteBehind } from './write-behind';

export interface ReportDeps {
  accounts: AccountStore;
  counters: CounterStore;
  clock: Clock;
  postgres: PostgresHealth;
  writeBehind: WriteBehind;
  /** How long the persisted counts of earlier days of the month are reused (default 5 s). */
  reportCacheTtlMs?: number;
}

const DAY_MS = 86_400_000;

/** Today's date and reset time of the last UTC day asked for: every report of a day has the same (hot path). */
let lastDay: { day: number; today: string; resetsAt: string } | undefined;

function dayStrings(now: number): { today: string; resetsAt: string } {
  const day = Math.floor(now / DAY_MS);
  if (lastDay?.day !== day) lastDay = { day, today: utcDay(now), resetsAt: isoTimestamp(nextUtcMidnight(now)) };
  return lastDay;
}

/**
 * Usage reports: today's count (from the counting itself, or read live),
 * the month's earlier days (persisted, cached, merged with the unflushed
 * counts) and the billing figures.
 */
export class UsageReports {
  /** Persisted counts of the month's earlier days, per account (they change only by late flushes). */
  private readonly earlierDays = new Map<string, { month: string; today: string; days: DayCount[]; expires: number }>();

  constructor(private readonly deps: ReportDeps) {}

  /** Usage report of an account given today's count (taken from the counting itself). */
  async report(p: KeyPrincipal, todayCount: number, now: number): Promise<UsageReport> {
    const { today, resetsAt } = dayStrings(now);
    const { start } = monthBounds(now);
    const earlier = await this.earlierDaysOf(p.accountId, start, today);
    const days = new Map(earlier.days.map((d) => [d.day, d.count]));
    for (const q of this.deps.writeBehind.daysOf(p.accountId, start, today)) days.set(q.day, Math.max(days.get(q.day) ?? 0, q.count));
    days.set(today, todayCount);
    return {
      tier: p.tier,
      dailyLimit: p.dailyLimit,
      today: { requestCount: todayCount, remaining: Math.max(0, p.dailyLimit - todayCount), resetsAt },
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
    const { postgres } = this.deps;
    const now = this.deps.clock.now();
    if (today <= monthStart) return { days: [], stale: false };
    const cached = this.earlierDays.get(accountId);
    if (cached && cached.month === monthStart && cached.today === today && cached.expires > now) return { days: cached.days, stale: false };
    let days: DayCount[];
    try {
      if (postgres.down()) throw new Error('postgres unavailable (retrying shortly)');
      days = await this.deps.accounts.countsBetween(accountId, monthStart, utcDay(Date.parse(`${today}T00:00:00Z`) - 1));
    } catch (err) {
      if (!postgres.down()) postgres.failed(err, 'usage report');
      if (cached && cached.month === monthStart) return { days: cached.days, stale: true };
      throw err;
    }
    if (this.earlierDays.size > 100_000) this.earlierDays.clear();
    this.earlierDays.set(accountId, { month: monthStart, today, days, expires: now + (this.deps.reportCacheTtlMs ?? 5000) });
    return { days, stale: false };
  }

  /** Usage of an account without counting a request (unary GetUsage). */
  async usage(accountId: string): Promise<UsageReport | undefined> {
    const { accounts, counters, clock, writeBehind } = this.deps;
    const found = await accounts.accountWithTier(accountId);
    if (!found) return undefined;
    const now = clock.now();
    const today = utcDay(now);
    const live = await counters.get(accountId, today);
    const stored = (await accounts.dailyCounts([{ accountId, day: today }])).get(`${accountId}|${today}`) ?? 0;
    const pending = writeBehind.get(accountId, today) ?? 0;
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

  /**
   * Usage history (GET /v1/account/usage/daily): the persisted count of each day of the range,
   * merged with this replica's unflushed counts, and today's (when in the range) read live as
   * `usage` reads it, so today's figure is the report's. 400 for a bad range, undefined for an
   * unknown account.
   */
  async daily(accountId: string, query: { from?: string; to?: string }): Promise<{ range: DayRange; days: DailyUsage[] } | undefined> {
    const { accounts, counters, clock, writeBehind } = this.deps;
    const now = clock.now();
    const range = parseDayRange(query, now);
    const found = await accounts.accountWithTier(accountId);
    if (!found) return undefined;
    const days = new Map((await accounts.countsBetween(accountId, range.from, range.to)).map((d) => [d.day, d.count]));
    const after = utcDay(Date.parse(`${range.to}T00:00:00.000Z`) + DAY_MS);
    for (const q of writeBehind.daysOf(accountId, range.from, after)) days.set(q.day, Math.max(days.get(q.day) ?? 0, q.count));
    const today = utcDay(now);
    if (range.to === today) days.set(today, Math.max(days.get(today) ?? 0, (await counters.get(accountId, today)) ?? 0));
    // Each day in the tier in force at its end, as the billing close bills it.
    const history = await accounts.tierHistory(accountId, Date.parse(`${after}T00:00:00.000Z`));
    return {
      range,
      days: dailyHistory(
        range,
        [...days].map(([day, count]) => ({ day, count })),
        history,
      ),
    };
  }
}
