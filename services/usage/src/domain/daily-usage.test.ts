import { AppError } from '@fcd/service-kit/pure';
import { describe, expect, it } from 'vitest';
import { computeBilling } from './billing';
import { dailyHistory, parseDayRange } from './daily-usage';
import { computeStatement, periodBounds, type TierChange } from './proration';

const PRO: TierChange = { effectiveAt: 0, tier: 'pro', dailyLimit: 25_000, hardLimit: false, overageRateUsd: '0.003' };
const FREE: TierChange = { effectiveAt: 0, tier: 'free', dailyLimit: 100, hardLimit: true, overageRateUsd: '0' };

const NOW = Date.parse('2026-11-22T08:15:00.000Z');

function problem(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return { code: err.code, fields: err.details?.fields };
    throw err;
  }
  return 'no error';
}
const refused = (field: string, message: string) => ({ code: 'VALIDATION_ERROR', fields: [{ field, message }] });

describe('parseDayRange', () => {
  it('defaults to the 30 days ending today (UTC), and to 30 days ending at `to`', () => {
    expect(parseDayRange({}, NOW)).toEqual({ from: '2026-10-24', to: '2026-11-22' });
    expect(parseDayRange({ to: '2026-03-01' }, NOW)).toEqual({ from: '2026-01-31', to: '2026-03-01' });
    expect(parseDayRange({ from: '2026-11-01' }, NOW)).toEqual({ from: '2026-11-01', to: '2026-11-22' });
    expect(parseDayRange({ from: '2026-11-22', to: '2026-11-22' }, NOW)).toEqual({ from: '2026-11-22', to: '2026-11-22' });
  });

  it('takes at most 400 days, both ends included', () => {
    expect(parseDayRange({ from: '2025-10-19', to: '2026-11-22' }, NOW)).toEqual({ from: '2025-10-19', to: '2026-11-22' });
    expect(problem(() => parseDayRange({ from: '2025-10-18', to: '2026-11-22' }, NOW))).toEqual(
      refused('from', 'must be at most 400 days before to, both included'),
    );
  });

  it('refuses from after to, to after today, and what is not a calendar date, naming the parameter', () => {
    expect(problem(() => parseDayRange({ from: '2026-11-02', to: '2026-11-01' }, NOW))).toEqual(refused('from', 'must not be after to'));
    expect(problem(() => parseDayRange({ to: '2026-11-23' }, NOW))).toEqual(refused('to', 'must not be after today (2026-11-22, UTC)'));
    for (const bad of ['2026-02-30', '2026-13-01', '26-11-01', '2026-11-01T00:00:00Z', '']) {
      expect(problem(() => parseDayRange({ from: bad }, NOW))).toEqual(refused('from', 'must be a date (YYYY-MM-DD)'));
      expect(problem(() => parseDayRange({ to: bad }, NOW))).toEqual(refused('to', 'must be a date (YYYY-MM-DD)'));
    }
  });

  it('moves to the next day at the first millisecond of it', () => {
    expect(parseDayRange({}, Date.parse('2026-11-22T23:59:59.999Z')).to).toBe('2026-11-22');
    expect(parseDayRange({}, Date.parse('2026-11-23T00:00:00.000Z')).to).toBe('2026-11-23');
  });
});

describe('dailyHistory', () => {
  const counts = [
    { day: '2026-10-31', count: 30_000 },
    { day: '2026-11-01', count: 25_000 },
    { day: '2026-11-02', count: 25_001 },
    { day: '2026-11-04', count: 40_000 },
  ];

  it('lists every day of the range, oldest first, 0 for a day without requests, overage over the limit', () => {
    expect(dailyHistory({ from: '2026-11-01', to: '2026-11-05' }, counts, [PRO])).toEqual([
      { date: '2026-11-01', requests: 25_000, included: 25_000, overage: 0 },
      { date: '2026-11-02', requests: 25_001, included: 25_000, overage: 1 },
      { date: '2026-11-03', requests: 0, included: 25_000, overage: 0 },
      { date: '2026-11-04', requests: 40_000, included: 25_000, overage: 15_000 },
      { date: '2026-11-05', requests: 0, included: 25_000, overage: 0 },
    ]);
  });

  it('has no overage on a hard-limited tier', () => {
    const days = dailyHistory({ from: '2026-11-01', to: '2026-11-02' }, [{ day: '2026-11-01', count: 150 }], [FREE]);
    expect(days.map((d) => [d.requests, d.included, d.overage])).toEqual([
      [150, 100, 0],
      [0, 100, 0],
    ]);
  });

  it("sums, over a month, to the billing period's figures", () => {
    const now = Date.parse('2026-11-30T12:00:00.000Z');
    const days = dailyHistory({ from: '2026-11-01', to: '2026-11-30' }, counts, [PRO]);
    const billing = computeBilling({ nowMs: now, dailyLimit: 25_000, overageAllowed: true, overageRateUsd: '0.003', days: counts });
    const sum = (f: (d: (typeof days)[number]) => number) => days.reduce((n, d) => n + f(d), 0);
    expect([sum((d) => d.requests), sum((d) => d.included), sum((d) => d.overage)]).toEqual([
      billing.totalRequests,
      billing.includedRequests,
      billing.overageRequests,
    ]);
  });

  it("counts each day in the tier in force at its end: a month sums to the close's statement", () => {
    // Pro from before the month, Free from 10 Nov 15:00 (day 10 ends in Free, as the close bills it).
    const history = [PRO, { ...FREE, effectiveAt: Date.parse('2026-11-10T15:00:00.000Z') }];
    const nov = [...counts, { day: '2026-11-09', count: 26_000 }, { day: '2026-11-10', count: 300 }, { day: '2026-11-20', count: 90 }];
    const days = dailyHistory({ from: '2026-10-31', to: '2026-11-30' }, nov, history);
    expect(days.slice(9, 12).map((d) => [d.date, d.requests, d.included, d.overage])).toEqual([
      ['2026-11-09', 26_000, 25_000, 1000],
      ['2026-11-10', 300, 100, 0],
      ['2026-11-11', 0, 100, 0],
    ]);
    const month = days.slice(1);
    const statement = computeStatement({
      bounds: periodBounds('2026-11') as NonNullable<ReturnType<typeof periodBounds>>,
      history,
      counts: new Map(nov.map((c) => [c.day, c.count])),
    });
    const sum = (f: (d: (typeof days)[number]) => number) => month.reduce((n, d) => n + f(d), 0);
    expect([sum((d) => d.requests), sum((d) => d.included), sum((d) => d.overage)]).toEqual([
      statement.totalRequests,
      statement.includedRequests,
      statement.overageRequests,
    ]);
  });

  it('includes nothing on a day before the account existed', () => {
    const days = dailyHistory(
      { from: '2026-11-01', to: '2026-11-02' },
      [],
      [{ ...PRO, effectiveAt: Date.parse('2026-11-02T09:00:00.000Z') }],
    );
    expect(days.map((d) => d.included)).toEqual([0, 25_000]);
  });

  it('spans 400 days across a leap day', () => {
    const days = dailyHistory({ from: '2027-10-01', to: '2028-11-03' }, [], [PRO]);
    expect(days).toHaveLength(400);
    expect(days.map((d) => d.date)).toContain('2028-02-29');
    expect(days.at(-1)?.date).toBe('2028-11-03');
  });
});
