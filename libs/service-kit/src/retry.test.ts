import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock';
import { parseDurationMs, RetryExhaustedError, withRetry } from './retry';

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const retryable = (err: unknown) => (err as { code?: string }).code === 'ECONNREFUSED';

/** A clock that the injected sleep advances: no real waiting. */
function fakeTime() {
  const clock = new ManualClock(0);
  const waits: number[] = [];
  return {
    clock,
    waits,
    sleep: async (ms: number) => {
      waits.push(ms);
      clock.advance(ms);
    },
  };
}

describe('withRetry', () => {
  it('retries a retryable failure with doubling backoff (equal jitter) until fn succeeds', async () => {
    const t = fakeTime();
    let calls = 0;
    const result = await withRetry(
      async () => {
        calls++;
        if (calls < 5) throw refused;
        return 'done';
      },
      { retryForMs: 60_000, isRetryable: retryable, initialDelayMs: 100, maxDelayMs: 400, random: () => 0.5, ...t },
    );
    expect(result).toBe('done');
    expect(calls).toBe(5);
    // ceilings 100, 200, 400, 400 → half plus half of the jitter (0.5) of each.
    expect(t.waits).toEqual([75, 150, 300, 300]);
  });

  it('gives up after retryForMs from the first failure with the last error, never waiting past the deadline', async () => {
    const t = fakeTime();
    const retries: number[] = [];
    const err = await withRetry(
      async () => {
        throw refused;
      },
      {
        retryForMs: 1000,
        isRetryable: retryable,
        initialDelayMs: 200,
        maxDelayMs: 400,
        random: () => 0.999,
        onRetry: (i) => retries.push(i.attempt),
        ...t,
      },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryExhaustedError);
    expect((err as RetryExhaustedError).cause).toBe(refused);
    expect(t.waits).toEqual([200, 400, 400]);
    expect(t.clock.now()).toBe(1000);
    expect((err as RetryExhaustedError).attempts).toBe(4);
    expect((err as Error).message).toBe('gave up after 4 attempts in 1 s: connect ECONNREFUSED 127.0.0.1:5432');
    expect(retries).toEqual([1, 2, 3]);
  });

  it('throws a non-retryable error at once, and never retries when retryForMs is 0', async () => {
    const t = fakeTime();
    const bug = new Error('syntax error');
    await expect(withRetry(async () => Promise.reject(bug), { retryForMs: 60_000, isRetryable: retryable, ...t })).rejects.toBe(bug);
    await expect(withRetry(async () => Promise.reject(refused), { retryForMs: 0, isRetryable: retryable, ...t })).rejects.toBeInstanceOf(
      RetryExhaustedError,
    );
    expect(t.waits).toEqual([]);
  });
});

describe('parseDurationMs', () => {
  it('reads ms, s, m, h and plain seconds; refuses anything else', () => {
    expect(['500ms', '60s', '2m', '1h', '90', '1.5s'].map(parseDurationMs)).toEqual([500, 60_000, 120_000, 3_600_000, 90_000, 1500]);
    expect(['', 's', '-1s', '5 d', '1e3'].map(parseDurationMs)).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });
});
