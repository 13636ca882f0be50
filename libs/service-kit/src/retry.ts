import { setTimeout as delay } from 'node:timers/promises';
import { Backoff } from './backoff';
import { type Clock, systemClock } from './clock';

export interface RetryOptions {
  /** Keep retrying for this long (ms), counted from the first failure; 0 = never retry. */
  retryForMs: number;
  /** Which errors are worth another try (e.g. isDatabaseUnavailable); others are thrown at once. */
  isRetryable: (err: unknown) => boolean;
  /** First backoff (ms), doubled after each failure up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
  /**
   * In [0, 1): spreads each backoff over its upper half ("equal jitter", `Backoff` with jitter 0.5),
   * rising with the draw: 0 waits half the backoff, towards 1 the whole of it (as before `Backoff`).
   */
  random?: () => number;
  /** Called before each wait (log a line there). */
  onRetry?: (info: { err: unknown; attempt: number; delayMs: number; elapsedMs: number }) => void;
  signal?: AbortSignal;
}

/** The retries ran out: `cause` is the last error. */
export class RetryExhaustedError extends Error {
  constructor(
    override readonly cause: unknown,
    readonly attempts: number,
    readonly elapsedMs: number,
  ) {
    super(`gave up after ${attempts} attempts in ${Math.round(elapsedMs / 1000)} s: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'RetryExhaustedError';
  }
}

/**
 * Runs fn until it succeeds; a retryable failure is tried again after an
 * exponential backoff with jitter, for at most `retryForMs` from the first
 * failure, then RetryExhaustedError. fn must be safe to run again (idempotent).
 */
export async function withRetry<T>(fn: () => Promise<T>, o: RetryOptions): Promise<T> {
  const clock = o.clock ?? systemClock;
  const sleep = o.sleep ?? ((ms: number) => delay(ms));
  const draw = o.random;
  const backoff = new Backoff({
    initialMs: o.initialDelayMs ?? 200,
    maxMs: o.maxDelayMs ?? 5000,
    jitter: 0.5,
    // `Backoff` falls with its draw; this option's contract rises with it.
    ...(draw ? { random: () => 1 - draw() } : {}),
  });
  let firstFailure: number | undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!o.isRetryable(err) || o.signal?.aborted) throw err;
      const now = clock.now();
      firstFailure ??= now;
      const elapsedMs = now - firstFailure;
      const left = o.retryForMs - elapsedMs;
      if (left <= 0) throw new RetryExhaustedError(err, attempt, elapsedMs);
      const delayMs = Math.min(left, backoff.next());
      o.onRetry?.({ err, attempt, delayMs, elapsedMs });
      await sleep(delayMs);
    }
  }
}

/** A duration: `500ms`, `60s`, `2m`, `1h`, or a plain number of seconds. Undefined when malformed. */
export function parseDurationMs(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  return Math.round(Number(m[1]) * unit);
}
