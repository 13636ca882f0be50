/**
 * Billing figures (docs/metering.md "Usage report"), pure: the period is the UTC calendar month; the
 * included amount is daily_limit × days in the month; overage is the sum over
 * days of max(0, count − daily_limit), only for tiers that allow overage.
 */
export interface DayCount {
  day: string; // YYYY-MM-DD
  count: number;
}

export interface BillingFigures {
  start: string;
  end: string;
  totalRequests: number;
  includedRequests: number;
  overageRequests: number;
  overageRateUsd: string;
  estimatedOverageUsd: string;
}

const DAY_MS = 86_400_000;
/** The bounds of the last UTC day asked for: every request of a day asks for the same month (hot path). */
let lastBounds: { day: number; bounds: { start: string; end: string; days: number } } | undefined;

export function monthBounds(nowMs: number): { start: string; end: string; days: number } {
  const day = Math.floor(nowMs / DAY_MS);
  if (lastBounds?.day === day) return lastBounds.bounds;
  const bounds = computeMonthBounds(nowMs);
  lastBounds = { day, bounds };
  return bounds;
}

function computeMonthBounds(nowMs: number): { start: string; end: string; days: number } {
  const d = new Date(nowMs);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const days = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  const start = new Date(Date.UTC(y, m, 1)).toISOString().slice(0, 10);
  const end = new Date(Date.UTC(y, m, days)).toISOString().slice(0, 10);
  return { start, end, days };
}

/** Multiplies a request count by a decimal-string rate exactly (no floating point). */
export function multiplyUsd(count: number, rate: string): string {
  const match = /^(\d+)(?:\.(\d+))?$/.exec(rate);
  if (!match) throw new Error(`bad rate: ${rate}`);
  const frac = match[2] ?? '';
  const scale = Math.max(frac.length, 2);
  const units = BigInt(match[1] + frac.padEnd(scale, '0')) * BigInt(count);
  const s = units.toString().padStart(scale + 1, '0');
  return `${s.slice(0, -scale)}.${s.slice(-scale)}`;
}

/** A day's overage: the requests over the daily limit, for tiers that allow overage (a hard limit's are refused, so 0). */
export function dayOverage(count: number, dailyLimit: number, overageAllowed: boolean): number {
  return overageAllowed ? Math.max(0, count - dailyLimit) : 0;
}

export function computeBilling(input: {
  nowMs: number;
  dailyLimit: number;
  overageAllowed: boolean;
  overageRateUsd: string;
  days: DayCount[];
}): BillingFigures {
  const { start, end, days } = monthBounds(input.nowMs);
  let total = 0;
  let overage = 0;
  for (const { day, count } of input.days) {
    if (day < start || day > end) continue;
    total += count;
    overage += dayOverage(count, input.dailyLimit, input.overageAllowed);
  }
  return {
    start,
    end,
    totalRequests: total,
    includedRequests: input.dailyLimit * days,
    overageRequests: overage,
    overageRateUsd: input.overageAllowed ? input.overageRateUsd : '0.000',
    estimatedOverageUsd: multiplyUsd(overage, input.overageAllowed ? input.overageRateUsd : '0.000'),
  };
}
