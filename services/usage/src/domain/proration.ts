/**
 * A billing period's statement figures from the tier history and the stored daily counts
 * (docs/metering.md, "Billing close"), pure: no clock, no I/O.
 *
 * - The period is a UTC calendar month, `YYYY-MM`.
 * - A day is billed in the tier in force at its end (a change made during a day applies to the whole
 *   day); a day before the account existed has no tier: nothing included, no overage.
 * - Included requests = the sum over the days of the day's daily limit: days × limit per tier, so a
 *   mid-month change prorates them by the days in each tier.
 * - Overage is counted per day, as the running estimate counts it (domain/billing.ts): the day's
 *   requests over the day's limit, for a tier that allows overage (a hard limit's are refused, 0).
 * - Money is integer micro-dollars (BigInt), shown as a decimal string: never a float.
 */
const DAY_MS = 86_400_000;
const PERIOD = /^([0-9]{4})-(0[1-9]|1[0-2])$/;

/** One row of the tier history: the tier in force from `effectiveAt` (Unix ms) on. */
export interface TierChange {
  effectiveAt: number;
  tier: string;
  dailyLimit: number;
  hardLimit: boolean;
  /** Decimal string with at most 6 decimals, e.g. "0.003". */
  overageRateUsd: string;
}

export interface PeriodBounds {
  period: string;
  /** First and last day, YYYY-MM-DD. */
  start: string;
  end: string;
  days: number;
  startMs: number;
  /** The instant the period ends (the next month's first midnight, UTC). */
  endMs: number;
}

/** One tier's part of a statement. */
export interface TierLine {
  tier: string;
  days: number;
  dailyLimit: number;
  includedRequests: number;
  overageRequests: number;
  overageRateUsd: string;
  amountUsd: string;
}

export interface StatementFigures {
  tiers: TierLine[];
  totalRequests: number;
  includedRequests: number;
  overageRequests: number;
  /** The rate of the tier in force at the end of the period ("0.000" for a hard-limited tier). */
  overageRateUsd: string;
  amountMicroUsd: bigint;
}

/** The bounds of a `YYYY-MM` period, or undefined when it is not one. */
export function periodBounds(period: string): PeriodBounds | undefined {
  const m = PERIOD.exec(period);
  if (!m) return undefined;
  const y = Number(m[1]);
  const mon = Number(m[2]) - 1;
  const startMs = Date.UTC(y, mon, 1);
  const endMs = Date.UTC(y, mon + 1, 1);
  const days = Math.round((endMs - startMs) / DAY_MS);
  return { period, start: isoDay(startMs), end: isoDay(endMs - DAY_MS), days, startMs, endMs };
}

/** The period (UTC month) before the one holding `nowMs`: what the monthly close closes. */
export function previousPeriod(nowMs: number): string {
  const d = new Date(nowMs);
  return isoDay(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, 1)).slice(0, 7);
}

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The tier in force at the end of each day of the period (undefined before the account existed). */
export function tiersByDay(history: readonly TierChange[], bounds: PeriodBounds): Array<TierChange | undefined> {
  const sorted = [...history].sort((a, b) => a.effectiveAt - b.effectiveAt);
  const out: Array<TierChange | undefined> = [];
  let next = 0;
  let current: TierChange | undefined;
  for (let i = 0; i < bounds.days; i++) {
    const dayEnd = bounds.startMs + (i + 1) * DAY_MS;
    while (next < sorted.length && (sorted[next] as TierChange).effectiveAt < dayEnd) current = sorted[next++];
    out.push(current);
  }
  return out;
}

/** "0.003" → 3000n micro-dollars (at most 6 decimals). */
export function rateMicros(rate: string): bigint {
  const m = /^(\d+)(?:\.(\d{1,6}))?$/.exec(rate);
  if (!m) throw new Error(`bad rate: ${rate}`);
  return BigInt(m[1] as string) * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
}

/** Micro-dollars as a decimal string with 3 to 6 decimals, as exact as the figure: 19515000n → "19.515". */
export function formatMicroUsd(micros: bigint): string {
  const abs = micros < 0n ? -micros : micros;
  let frac = (abs % 1_000_000n).toString().padStart(6, '0');
  while (frac.length > 3 && frac.endsWith('0')) frac = frac.slice(0, -1);
  return `${micros < 0n ? '-' : ''}${abs / 1_000_000n}.${frac}`;
}

const lineKey = (t: TierChange) => `${t.tier}|${t.dailyLimit}|${t.overageRateUsd}|${t.hardLimit}`;

/** The statement of one account for one period. `counts` maps YYYY-MM-DD to the stored count. */
export function computeStatement(input: {
  bounds: PeriodBounds;
  history: readonly TierChange[];
  counts: ReadonlyMap<string, number>;
}): StatementFigures {
  const { bounds, counts } = input;
  const byDay = tiersByDay(input.history, bounds);
  const lines = new Map<string, { tier: TierChange; days: number; overage: number }>();
  let total = 0;
  byDay.forEach((tier, i) => {
    const count = counts.get(isoDay(bounds.startMs + i * DAY_MS)) ?? 0;
    total += count;
    if (!tier) return;
    const key = lineKey(tier);
    const line = lines.get(key) ?? { tier, days: 0, overage: 0 };
    line.days += 1;
    line.overage += tier.hardLimit ? 0 : Math.max(0, count - tier.dailyLimit);
    lines.set(key, line);
  });
  const tiers: TierLine[] = [];
  let amount = 0n;
  for (const { tier, days, overage } of lines.values()) {
    const rate = tier.hardLimit ? '0.000' : tier.overageRateUsd;
    const micros = BigInt(overage) * rateMicros(rate);
    amount += micros;
    tiers.push({
      tier: tier.tier,
      days,
      dailyLimit: tier.dailyLimit,
      includedRequests: days * tier.dailyLimit,
      overageRequests: overage,
      overageRateUsd: rate,
      amountUsd: formatMicroUsd(micros),
    });
  }
  const last = byDay[byDay.length - 1];
  return {
    tiers,
    totalRequests: total,
    includedRequests: tiers.reduce((n, t) => n + t.includedRequests, 0),
    overageRequests: tiers.reduce((n, t) => n + t.overageRequests, 0),
    overageRateUsd: last && !last.hardLimit ? last.overageRateUsd : '0.000',
    amountMicroUsd: amount,
  };
}
