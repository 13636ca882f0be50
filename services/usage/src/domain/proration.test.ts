import { describe, expect, it } from 'vitest';
import { multiplyUsd } from './billing';
import { computeStatement, formatMicroUsd, periodBounds, previousPeriod, rateMicros, type TierChange, tiersByDay } from './proration';

const PRO = { tier: 'pro', dailyLimit: 25_000, hardLimit: false, overageRateUsd: '0.003' };
const FREE = { tier: 'free', dailyLimit: 100, hardLimit: true, overageRateUsd: '0.000' };
const ENTERPRISE = { tier: 'enterprise', dailyLimit: 250_000, hardLimit: false, overageRateUsd: '0.002' };
const at = (iso: string, t: Omit<TierChange, 'effectiveAt'>): TierChange => ({ ...t, effectiveAt: Date.parse(iso) });
const oct = periodBounds('2026-10') as NonNullable<ReturnType<typeof periodBounds>>;

describe('periodBounds', () => {
  it('gives the UTC month, its days and its end instant', () => {
    expect(periodBounds('2026-10')).toEqual({
      period: '2026-10',
      start: '2026-10-01',
      end: '2026-10-31',
      days: 31,
      startMs: Date.parse('2026-10-01T00:00:00Z'),
      endMs: Date.parse('2026-11-01T00:00:00Z'),
    });
    expect(periodBounds('2028-02')?.days).toBe(29);
    expect(periodBounds('2026-12')?.end).toBe('2026-12-31');
  });
  it('refuses anything but YYYY-MM', () => {
    for (const bad of ['2026-13', '2026-00', '2026-1', '26-10', '2026-10-01', '', 'last']) expect(periodBounds(bad)).toBeUndefined();
  });
  it('names the month before an instant', () => {
    expect(previousPeriod(Date.parse('2026-12-01T00:30:00Z'))).toBe('2026-11');
    expect(previousPeriod(Date.parse('2027-01-01T00:00:00Z'))).toBe('2026-12');
  });
});

describe('tiersByDay', () => {
  it('bills a day in the tier in force at its end, and a day before the account existed in none', () => {
    const days = tiersByDay([at('2026-10-03T15:00:00Z', PRO), at('2026-10-11T09:30:00Z', FREE)], oct);
    expect(days.map((t) => t?.tier ?? null)).toEqual([null, null, ...Array(8).fill('pro'), ...Array(21).fill('free')]);
  });
  it('takes the last of several changes of one day', () => {
    const days = tiersByDay(
      [at('2026-09-01T00:00:00Z', PRO), at('2026-10-05T08:00:00Z', FREE), at('2026-10-05T20:00:00Z', ENTERPRISE)],
      oct,
    );
    expect(days.slice(3, 6).map((t) => t?.tier)).toEqual(['pro', 'enterprise', 'enterprise']);
  });
});

describe('computeStatement', () => {
  it('prorates the included requests of a Pro account downgraded to Free on day 11 (docs/metering.md worked example)', () => {
    const counts = new Map([
      ['2026-10-02', 30_000],
      ['2026-10-10', 25_001],
      ['2026-10-11', 100],
      ['2026-10-20', 40],
    ]);
    const s = computeStatement({ bounds: oct, history: [at('2026-09-15T12:00:00Z', PRO), at('2026-10-11T14:00:00Z', FREE)], counts });
    expect(s).toEqual({
      tiers: [
        {
          tier: 'pro',
          days: 10,
          dailyLimit: 25_000,
          includedRequests: 250_000,
          overageRequests: 5_001,
          overageRateUsd: '0.003',
          amountUsd: '15.003',
        },
        {
          tier: 'free',
          days: 21,
          dailyLimit: 100,
          includedRequests: 2_100,
          overageRequests: 0,
          overageRateUsd: '0.000',
          amountUsd: '0.000',
        },
      ],
      totalRequests: 55_141,
      includedRequests: 252_100,
      overageRequests: 5_001,
      overageRateUsd: '0.000',
      amountMicroUsd: 15_003_000n,
    });
  });
  it('counts overage per day against the day own limit, as the running estimate does', () => {
    const counts = new Map([
      ['2026-10-01', 26_505],
      ['2026-10-02', 30_000],
      ['2026-10-03', 10],
    ]);
    const s = computeStatement({ bounds: oct, history: [at('2026-01-01T00:00:00Z', PRO)], counts });
    expect(s.overageRequests).toBe(6_505);
    expect(s.includedRequests).toBe(31 * 25_000);
    expect(formatMicroUsd(s.amountMicroUsd)).toBe('19.515');
    expect(formatMicroUsd(s.amountMicroUsd)).toBe(multiplyUsd(6_505, '0.003'));
  });
  it('prices each tier at its own rate on an upgrade from Pro to Enterprise', () => {
    const counts = new Map([
      ['2026-10-05', 25_999],
      ['2026-10-25', 250_003],
    ]);
    const s = computeStatement({ bounds: oct, history: [at('2026-10-01T00:00:00Z', PRO), at('2026-10-21T00:00:00Z', ENTERPRISE)], counts });
    expect(s.tiers.map((t) => [t.tier, t.days, t.overageRequests, t.amountUsd])).toEqual([
      ['pro', 20, 999, '2.997'],
      ['enterprise', 11, 3, '0.006'],
    ]);
    expect(formatMicroUsd(s.amountMicroUsd)).toBe('3.003');
    expect(s.overageRateUsd).toBe('0.002');
  });
  it('gives an account created after the period nothing included', () => {
    const s = computeStatement({ bounds: oct, history: [at('2026-11-02T00:00:00Z', PRO)], counts: new Map() });
    expect(s).toEqual({
      tiers: [],
      totalRequests: 0,
      includedRequests: 0,
      overageRequests: 0,
      overageRateUsd: '0.000',
      amountMicroUsd: 0n,
    });
  });
});

describe('money', () => {
  it('keeps micro-dollars exact and prints 3 to 6 decimals', () => {
    expect(rateMicros('0.003')).toBe(3000n);
    expect(rateMicros('12.000125')).toBe(12_000_125n);
    expect(formatMicroUsd(0n)).toBe('0.000');
    expect(formatMicroUsd(75_000_000n)).toBe('75.000');
    expect(formatMicroUsd(1n)).toBe('0.000001');
    expect(formatMicroUsd(-15_000n)).toBe('-0.015');
    // 0.1 + 0.2 in floats is 0.30000000000000004; in micro-dollars it is exact.
    expect(formatMicroUsd(rateMicros('0.1') + rateMicros('0.2'))).toBe('0.300');
    expect(() => rateMicros('0.0000001')).toThrow('bad rate');
  });
});
