import { describe, expect, it } from 'vitest';
import {
  MAX_PAUSE_MS,
  MAX_START_DELAY_MS,
  maxStartDelayMs,
  nextStartAt,
  type PauseState,
  pauseAfterAttempt,
  RATE_LIMIT_RANGE,
  rateAllowance,
  rateBurst,
  rateIntervalMs,
  startDeadline,
  startsTooLate,
} from './limits';

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

describe('the start bound of rate-limited attempts (explicit times)', () => {
  it('is 50 ms after the claim was issued, 25 ms from 50/s (a burst leaves half the margin)', () => {
    expect(MAX_START_DELAY_MS).toBe(50);
    expect(startDeadline(5, 10_000)).toBe(10_050);
    expect(startDeadline(49, 10_000)).toBe(10_050);
    expect(startDeadline(50, 10_000)).toBe(10_025);
    expect(startDeadline(1000, 10_000)).toBe(10_025);
  });

  it('a start at the deadline goes out; a start past it is too late; no rate limit, no bound', () => {
    expect(startsTooLate(10_050, 10_000)).toBe(false);
    expect(startsTooLate(10_050, 10_050)).toBe(false);
    expect(startsTooLate(10_050, 10_050.5)).toBe(true);
    expect(startsTooLate(10_050, 10_250)).toBe(true);
    expect(startsTooLate(null, 10_000_000)).toBe(false);
  });

  it.each([1, 5, 49, 50, 100, 1000])(
    'at %i/s, starts delayed by up to the bound and arrivals by up to as much again never crowd a 1 s window',
    (rate) => {
      // At worst one attempt starts and arrives at once and another is late by both bounds: the
      // arrivals in a 1 s window were admitted within 1 s + 2 × bound.
      const starts = simulate(rate, 1, 5000);
      expect(maxInWindow(starts, 1000 + 2 * maxStartDelayMs(rate))).toBeLessThanOrEqual(rate);
    },
  );
});

describe('pauseAfterAttempt (injected times)', () => {
  const o = { threshold: 3, cooldownMs: 1000 };
  const fresh = { connectionFailures: 0, pausedUntil: null, pauseReason: null };
  const attempt = (over: Partial<Parameters<typeof pauseAfterAttempt>[1]>) => ({
    finishedAt: 10_000,
    success: false,
    responseStatus: null,
    retryAfterMs: null,
    connectionFailure: false,
    ...over,
  });

  it('a 429 or 503 with Retry-After pauses until then, clamped to an hour; without it, nothing', () => {
    expect(pauseAfterAttempt(fresh, attempt({ responseStatus: 429, retryAfterMs: 3000 }), o)).toEqual({
      state: { connectionFailures: 0, pausedUntil: 13_000, pauseReason: 'retry_after' },
      pause: { until: 13_000, reason: 'retry_after' },
    });
    expect(pauseAfterAttempt(fresh, attempt({ responseStatus: 503, retryAfterMs: 10 * MAX_PAUSE_MS }), o).pause).toEqual({
      until: 10_000 + MAX_PAUSE_MS,
      reason: 'retry_after',
    });
    expect(pauseAfterAttempt(fresh, attempt({ responseStatus: 429 }), o).pause).toBeNull();
    expect(pauseAfterAttempt(fresh, attempt({ responseStatus: 500, retryAfterMs: 3000 }), o).pause).toBeNull();
  });

  it('opens after `threshold` connection failures in a row, and an HTTP response closes it', () => {
    let state: PauseState = fresh;
    const fail = attempt({ connectionFailure: true });
    for (let i = 1; i < 3; i++) {
      const r = pauseAfterAttempt(state, fail, o);
      expect(r.pause).toBeNull();
      state = r.state;
    }
    const tripped = pauseAfterAttempt(state, fail, o);
    expect(tripped).toEqual({
      state: { connectionFailures: 3, pausedUntil: 11_000, pauseReason: 'unreachable' },
      pause: { until: 11_000, reason: 'unreachable' },
    });
    // A failing probe pauses it again.
    expect(pauseAfterAttempt(tripped.state, { ...fail, finishedAt: 12_000 }, o).pause).toEqual({ until: 13_000, reason: 'unreachable' });
    // A 500 is an answer: the circuit closes (the retry schedule handles the delivery).
    expect(pauseAfterAttempt(tripped.state, attempt({ responseStatus: 500, finishedAt: 12_000 }), o).state.connectionFailures).toBe(0);
    expect(pauseAfterAttempt(tripped.state, attempt({ success: true, responseStatus: 204 }), o).state).toEqual({
      connectionFailures: 0,
      pausedUntil: 11_000,
      pauseReason: 'unreachable',
    });
  });

  it('never shortens a longer pause already set', () => {
    const long = { connectionFailures: 0, pausedUntil: 50_000, pauseReason: 'retry_after' as const };
    const r = pauseAfterAttempt(long, attempt({ responseStatus: 429, retryAfterMs: 1000 }), o);
    expect(r.state).toEqual(long);
    expect(r.pause).toEqual({ until: 11_000, reason: 'retry_after' });
  });
});
