import { utcDay, validationError } from '@fcd/service-kit/pure';
import { type DayCount, dayOverage } from './billing';
import { type TierChange, tiersByDay } from './proration';

/**
 * Usage history (`GET /v1/account/usage/daily`, docs/metering.md "Usage history"): each UTC day's
 * count and its overage, computed as the billing close computes them: each day in the tier in
 * force at its end, from the tier history (proration.ts `tiersByDay`), its overage as billing.ts
 * `dayOverage`; over a full calendar: a day without requests is there with 0, a day before the
 * account existed with nothing included.
 */

/** The longest range asked for at once, in days (both ends included). */
const MAX_HISTORY_DAYS = 400;

/** Without `from`, the range is this many days ending at `to` (both included). */
const DEFAULT_HISTORY_DAYS = 30;

const DAY_MS = 86_400_000;

export interface DayRange {
  from: string;
  to: string;
}

export interface DailyUsage {
  /** YYYY-MM-DD (UTC day) */
  date: string;
  requests: number;
  /** The requests the day includes: the daily limit (summed over a month: the billing period's `included_requests`). */
  included: number;
  /** max(0, requests − daily limit) for tiers with overage; 0 for a hard-limited tier. */
  overage: number;
}

function dayMs(date: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) return undefined;
  const ms = Date.parse(`${date}T00:00:00.000Z`);
  return Number.isFinite(ms) && utcDay(ms) === date ? ms : undefined;
}

/**
 * The range of a request: `to` defaults to today (UTC) and may not be after it; `from` defaults to
 * DEFAULT_HISTORY_DAYS days ending at `to`; from ≤ to and at most MAX_HISTORY_DAYS days, else 400
 * VALIDATION_ERROR naming the parameter.
 */
export function parseDayRange(query: { from?: string | undefined; to?: string | undefined }, now: number): DayRange {
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  const to = query.to === undefined ? today : dayMs(query.to);
  if (to === undefined) throw validationError([{ field: 'to', message: 'must be a date (YYYY-MM-DD)' }]);
  if (to > today) throw validationError([{ field: 'to', message: `must not be after today (${utcDay(today)}, UTC)` }]);
  const from = query.from === undefined ? to - (DEFAULT_HISTORY_DAYS - 1) * DAY_MS : dayMs(query.from);
  if (from === undefined) throw validationError([{ field: 'from', message: 'must be a date (YYYY-MM-DD)' }]);
  if (from > to) throw validationError([{ field: 'from', message: 'must not be after to' }]);
  if ((to - from) / DAY_MS + 1 > MAX_HISTORY_DAYS)
    throw validationError([{ field: 'from', message: `must be at most ${MAX_HISTORY_DAYS} days before to, both included` }]);
  return { from: utcDay(from), to: utcDay(to) };
}

/** Every day of the range, oldest first, with its count (0 when none), its tier's limit and overage. */
export function dailyHistory(range: DayRange, counts: readonly DayCount[], history: readonly TierChange[]): DailyUsage[] {
  const byDay = new Map(counts.map((c) => [c.day, c.count]));
  const startMs = Date.parse(`${range.from}T00:00:00.000Z`);
  const days = (Date.parse(`${range.to}T00:00:00.000Z`) - startMs) / DAY_MS + 1;
  const tiers = tiersByDay(history, { period: '', start: range.from, end: range.to, days, startMs, endMs: startMs + days * DAY_MS });
  return tiers.map((tier, i) => {
    const date = utcDay(startMs + i * DAY_MS);
    const requests = byDay.get(date) ?? 0;
    const included = tier?.dailyLimit ?? 0;
    return { date, requests, included, overage: tier ? dayOverage(requests, tier.dailyLimit, !tier.hardLimit) : 0 };
  });
}
