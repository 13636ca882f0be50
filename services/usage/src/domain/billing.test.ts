import { describe, expect, it } from 'vitest';
import { computeBilling, monthBounds, multiplyUsd } from './billing';

const at = (iso: string) => new Date(iso).getTime();

describe('monthBounds', () => {
  it('is the UTC calendar month, leap February included', () => {
    expect(monthBounds(at('2026-11-22T08:15:30.123Z'))).toEqual({ start: '2026-11-01', end: '2026-11-30', days: 30 });
    expect(monthBounds(at('2028-02-29T23:59:59.999Z'))).toEqual({ start: '2028-02-01', end: '2028-02-29', days: 29 });
    expect(monthBounds(at('2026-12-31T23:59:59.999Z'))).toEqual({ start: '2026-12-01', end: '2026-12-31', days: 31 });
  });

  it('remembers the last day asked for, and moves on at the first millisecond of the next one', () => {
    expect(monthBounds(at('2026-11-30T00:00:00.000Z'))).toEqual({ start: '2026-11-01', end: '2026-11-30', days: 30 });
    expect(monthBounds(at('2026-11-30T23:59:59.999Z'))).toEqual({ start: '2026-11-01', end: '2026-11-30', days: 30 });
    expect(monthBounds(at('2026-12-01T00:00:00.000Z'))).toEqual({ start: '2026-12-01', end: '2026-12-31', days: 31 });
    // Back in time (an injected clock): computed again, not the remembered month.
    expect(monthBounds(at('2026-11-30T23:59:59.999Z'))).toEqual({ start: '2026-11-01', end: '2026-11-30', days: 30 });
  });
});

describe('multiplyUsd', () => {
  it('multiplies exactly, without floating point', () => {
    expect(multiplyUsd(0, '0.003')).toBe('0.000');
    expect(multiplyUsd(1, '0.003')).toBe('0.003');
    expect(multiplyUsd(1500, '0.003')).toBe('4.500');
    expect(multiplyUsd(333_333, '0.003')).toBe('999.999');
    expect(multiplyUsd(7, '2')).toBe('14.00');
  });
  it('refuses a malformed rate', () => {
    expect(() => multiplyUsd(1, '-0.1')).toThrow('bad rate');
  });
});

describe('computeBilling', () => {
  it('sums overage per day over the limit for a Pro account, ignoring days outside the month', () => {
    const b = computeBilling({
      nowMs: at('2026-11-22T10:00:00.000Z'),
      dailyLimit: 25_000,
      overageAllowed: true,
      overageRateUsd: '0.003',
      days: [
        { day: '2026-10-31', count: 90_000 }, // previous month: not in the period
        { day: '2026-11-02', count: 26_000 }, // 1,000 over
        { day: '2026-11-10', count: 25_000 }, // exactly at the limit
        { day: '2026-11-15', count: 30_500 }, // 5,500 over
        { day: '2026-11-22', count: 12 },
      ],
    });
    expect(b).toEqual({
      start: '2026-11-01',
      end: '2026-11-30',
      totalRequests: 26_000 + 25_000 + 30_500 + 12,
      includedRequests: 25_000 * 30,
      overageRequests: 6_500,
      overageRateUsd: '0.003',
      estimatedOverageUsd: '19.500',
    });
  });

  it('never bills overage for a hard-limited (Free) tier', () => {
    const b = computeBilling({
      nowMs: at('2026-02-03T00:00:00.000Z'),
      dailyLimit: 100,
      overageAllowed: false,
      overageRateUsd: '0.000',
      days: [{ day: '2026-02-01', count: 150 }],
    });
    expect(b.overageRequests).toBe(0);
    expect(b.includedRequests).toBe(2800);
    expect(b.estimatedOverageUsd).toBe('0.000');
  });
});
