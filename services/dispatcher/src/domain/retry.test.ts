import { ManualClock } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_SCHEDULE_MS, decideAfterAttempt, parseRetrySchedule } from './retry';

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

describe('deactivation (SPEC §8)', () => {
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
