import { describe, expect, it } from 'vitest';
import { nextStartAt, RATE_LIMIT_RANGE, rateAllowance, rateBurst, rateIntervalMs } from './limits';

/** Simulates a sender that starts as many attempts as allowed whenever the injected clock ticks. */
function simulate(rate: number, stepMs: number, durationMs: number): number[] {
  const starts: number[] = [];
  let tat: number | null = null;
  for (let now = 0; now < durationMs; now += stepMs) {
    const a = rateAllowance(rate, tat, now);
    for (let i = 0; i < a.allowed; i++) starts.push(now);
    tat = a.base + a.allowed * a.intervalMs;
  }
  return starts;
}

function maxInWindow(starts: number[], windowMs: number): number {
  let max = 0;
  let j = 0;
  for (let i = 0; i < starts.length; i++) {
    while ((starts[i] as number) - (starts[j] as number) >= windowMs) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

describe('rateAllowance (GCRA with an injected clock)', () => {
  it('paces 5/s one start at a time, 220 ms apart', () => {
    expect(rateAllowance(5, null, 1000)).toEqual({ allowed: 1, base: 1000, intervalMs: 220 });
    expect(rateAllowance(5, 1220, 1100).allowed).toBe(0);
    expect(rateAllowance(5, 1220, 1220).allowed).toBe(1);
    // An idle subscription earns no burst beyond its limit.
    expect(rateAllowance(5, 0, 60_000).allowed).toBe(1);
    expect(nextStartAt(5, rateAllowance(5, null, 1000), 1)).toBe(1220);
  });

  it('lets fast subscriptions start a small burst per claim', () => {
    expect(rateBurst(1000)).toBe(40);
    expect(rateBurst(49)).toBe(1);
    expect(rateAllowance(1000, null, 0).allowed).toBe(40);
    expect(rateIntervalMs(1000)).toBeCloseTo(1.1);
  });

  it.each([1, 2, 5, 24, 25, 26, 49, 50, 51, 99, 100, 333, 999, 1000])(
    'never admits more than %i in any 1 s window, with 100 ms to spare (50 with a burst)',
    (rate) => {
      for (const step of [0.5, 1, 7, 50]) {
        const starts = simulate(rate, step, 5000);
        expect(maxInWindow(starts, 1000)).toBeLessThanOrEqual(rate);
        // Arrivals drifting by up to 100 ms (50 ms with a burst) still fit: no such wider window of starts holds more.
        expect(maxInWindow(starts, rateBurst(rate) === 1 ? 1099 : 1049)).toBeLessThanOrEqual(rate);
        // And the limit is used: over 5 s at least 85 % of rate × 5 start (coarse ticks lose a little).
        if (step <= 1) expect(starts.length).toBeGreaterThanOrEqual(Math.floor(rate * 5 * 0.85));
      }
    },
  );

  it('has the documented range', () => {
    expect(RATE_LIMIT_RANGE).toEqual({ min: 1, max: 1000 });
  });
});
