import { ManualClock } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../delivery/sender';
import { DEFAULT_RETRY_SCHEDULE_MS, decideAfterAttempt, parseRetrySchedule, retryDelay } from './retry';

const clock = new ManualClock(Date.parse('2026-11-22T08:00:00.000Z'));
const base = { success: false, manual: false, firstAttemptAt: clock.now(), lastSuccessAt: null };

describe('retry schedule', () => {
  it('defaults to +1 min, +5 min, +30 min, +2 h, +12 h', () => {
    expect(DEFAULT_RETRY_SCHEDULE_MS).toEqual([60_000, 300_000, 1_800_000, 7_200_000, 43_200_000]);
    expect(parseRetrySchedule('1m,5m,30m,2h,12h')).toEqual(DEFAULT_RETRY_SCHEDULE_MS);
  });

  it('parses milliseconds and units, and refuses garbage', () => {
    expect(parseRetrySchedule('200, 400ms,1s')).toEqual([200, 400, 1000]);
    expect(() => parseRetrySchedule('')).toThrow();
    expect(() => parseRetrySchedule('1d')).toThrow();
    expect(() => parseRetrySchedule('1m,,2m')).toThrow();
  });

  it('schedules retry n after failed attempt n, counted from the end of that attempt', () => {
    const c = new ManualClock(clock.now());
    const times: number[] = [];
    for (let attempt = 1; attempt <= 5; attempt++) {
      c.advance(1234);
      const d = decideAfterAttempt({ ...base, attempt, finishedAt: c.now() }, DEFAULT_RETRY_SCHEDULE_MS);
      expect(d.status).toBe('pending');
      if (d.status !== 'pending') return;
      times.push(d.nextAttemptAt - c.now());
      c.set(d.nextAttemptAt);
    }
    expect(times).toEqual(DEFAULT_RETRY_SCHEDULE_MS);
  });

  it('a success ends the delivery at any attempt', () => {
    expect(decideAfterAttempt({ ...base, success: true, attempt: 4, finishedAt: clock.now() }, DEFAULT_RETRY_SCHEDULE_MS)).toEqual({
      status: 'succeeded',
    });
  });
});

describe('deactivation (docs/webhooks.md)', () => {
  it('when retry 5 (attempt 6) fails: failed and deactivate', () => {
    expect(decideAfterAttempt({ ...base, attempt: 6, finishedAt: clock.now() }, DEFAULT_RETRY_SCHEDULE_MS)).toEqual({
      status: 'failed',
      deactivate: true,
    });
  });

  it('not when another delivery to the subscription succeeded after this delivery’s first attempt', () => {
    const input = { ...base, attempt: 6, finishedAt: clock.now() + 60_000, lastSuccessAt: base.firstAttemptAt + 1 };
    expect(decideAfterAttempt(input, DEFAULT_RETRY_SCHEDULE_MS)).toEqual({ status: 'failed', deactivate: false });
  });

  it('still deactivates when the last success came before this delivery’s first attempt', () => {
    const input = { ...base, attempt: 6, finishedAt: clock.now(), lastSuccessAt: base.firstAttemptAt - 1 };
    expect(decideAfterAttempt(input, DEFAULT_RETRY_SCHEDULE_MS)).toEqual({ status: 'failed', deactivate: true });
  });

  it('a manual attempt (test event, manual retry) is tried once and never deactivates', () => {
    expect(decideAfterAttempt({ ...base, manual: true, attempt: 1, finishedAt: clock.now() }, DEFAULT_RETRY_SCHEDULE_MS)).toEqual({
      status: 'failed',
      deactivate: false,
    });
    expect(decideAfterAttempt({ ...base, manual: true, attempt: 7, finishedAt: clock.now() }, DEFAULT_RETRY_SCHEDULE_MS)).toEqual({
      status: 'failed',
      deactivate: false,
    });
  });

  it('follows a shrunk schedule of any length', () => {
    const schedule = parseRetrySchedule('200ms,400ms');
    expect(decideAfterAttempt({ ...base, attempt: 2, finishedAt: 1000 }, schedule)).toEqual({ status: 'pending', nextAttemptAt: 1400 });
    expect(decideAfterAttempt({ ...base, attempt: 3, finishedAt: 1000 }, schedule)).toEqual({ status: 'failed', deactivate: true });
  });
});

describe('Retry-After, jitter and permanent failures', () => {
  const at = clock.now();
  const fixed = (r: number) => () => r;

  it('honours Retry-After clamped between the scheduled delay and twice it', () => {
    const schedule = [1000, 5000];
    const next = (retryAfterMs: number | null) => {
      const d = decideAfterAttempt({ ...base, attempt: 1, finishedAt: at, retryAfterMs }, schedule, { jitter: 0.2, random: fixed(0) });
      return d.status === 'pending' ? d.nextAttemptAt - at : undefined;
    };
    expect(next(2000)).toBe(2000); // Retry-After: 2 under a 1 s schedule: after 2 s, not 1 s
    expect(next(500)).toBe(1000); // never sooner than scheduled
    expect(next(3_600_000)).toBe(2000); // never later than twice the schedule
    expect(next(null)).toBe(800); // no Retry-After: the jittered schedule
  });

  it('spreads each scheduled delay by ±jitter from the injected random source', () => {
    expect(retryDelay(60_000, null, { jitter: 0.2, random: fixed(0) })).toBe(48_000);
    expect(retryDelay(60_000, null, { jitter: 0.2, random: fixed(0.5) })).toBe(60_000);
    expect(retryDelay(60_000, null, { jitter: 0.2, random: fixed(0.999_999) })).toBe(72_000);
    expect(retryDelay(60_000, null)).toBe(60_000); // no jitter unless asked
  });

  it('stops at once on a permanent failure (destination refused), without deactivating', () => {
    expect(decideAfterAttempt({ ...base, attempt: 1, finishedAt: at, permanent: true }, DEFAULT_RETRY_SCHEDULE_MS)).toEqual({
      status: 'failed',
      deactivate: false,
    });
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-11-24T00:00:00.000Z');
  it('reads delay-seconds and HTTP dates; null for anything else', () => {
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('Tue, 24 Nov 2026 00:00:03 GMT', now)).toBe(3000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 23:00:00 GMT', now)).toBe(0);
    for (const bad of [undefined, '', '-1', '1.5', 'soon']) expect(parseRetryAfter(bad, now)).toBeNull();
  });
});
