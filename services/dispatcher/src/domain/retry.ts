import type { AttemptDecision, DecisionInput } from '@fcd/webhooks';

/**
 * The retry schedule and the deactivation rule (docs/webhooks.md), pure: no clock, no
 * I/O. Retry n follows the failure of attempt n, counted from the end of that
 * failed attempt; when the last retry fails the delivery is failed and the
 * subscription deactivated, unless another delivery to it succeeded after this
 * delivery's first attempt. Manual attempts (test events, manual retries) are
 * attempted once and never deactivate.
 */

/** 1 min, 5 min, 30 min, 2 h, 12 h. */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [60_000, 300_000, 1_800_000, 7_200_000, 43_200_000];

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
const ITEM = '\\s*\\d+(?:ms|s|m|h)?\\s*';
/** For the config schema: a non-empty comma-separated list of delays. */
export const RETRY_SCHEDULE_PATTERN = `^${ITEM}(,${ITEM})*$`;

/** "1m,5m,30m,2h,12h" or "200,400,800" (ms) → delays in ms. */
export function parseRetrySchedule(text: string): number[] {
  if (!new RegExp(RETRY_SCHEDULE_PATTERN).test(text)) throw new Error(`not a retry schedule: ${text}`);
  return text.split(',').map((item) => {
    const m = /^(\d+)(ms|s|m|h)?$/.exec(item.trim());
    if (!m) throw new Error(`not a delay: ${item}`);
    return Number(m[1]) * UNIT_MS[(m[2] ?? 'ms') as keyof typeof UNIT_MS];
  });
}

export interface RetryOptions {
  /** Spread of each scheduled delay: 0.2 = ±20 % (default 0: exactly the schedule). */
  jitter?: number;
  /** Uniform in [0, 1): Math.random in production, injected in tests. */
  random?: () => number;
}

/**
 * The delay before retry n: the scheduled delay with ±jitter; when the receiver answered 429 or
 * 503 with Retry-After, that wait clamped between the scheduled delay and twice it (a receiver
 * may slow us down, not stall a delivery for days, nor hurry it).
 */
export function retryDelay(scheduled: number, retryAfterMs: number | null | undefined, options: RetryOptions = {}): number {
  if (retryAfterMs !== null && retryAfterMs !== undefined) return Math.min(Math.max(retryAfterMs, scheduled), 2 * scheduled);
  const jitter = options.jitter ?? 0;
  if (jitter === 0) return scheduled;
  const r = (options.random ?? Math.random)();
  return Math.round(scheduled * (1 + jitter * (2 * r - 1)));
}

/** The decision after an attempt: succeeded, retry at a time, or failed (and whether to deactivate). */
export function decideAfterAttempt(input: DecisionInput, schedule: readonly number[], options: RetryOptions = {}): AttemptDecision {
  if (input.success) return { status: 'succeeded' };
  if (input.manual) return { status: 'failed', deactivate: false };
  // A destination refused for good (the URL or its address fails the safety rules) is not retried.
  if (input.permanent) return { status: 'failed', deactivate: false };
  // Attempt n failed: retry n follows, if the schedule has one.
  const delay = schedule[input.attempt - 1];
  if (delay !== undefined) return { status: 'pending', nextAttemptAt: input.finishedAt + retryDelay(delay, input.retryAfterMs, options) };
  const recoveredMeanwhile = input.lastSuccessAt !== null && input.lastSuccessAt > input.firstAttemptAt;
  return { status: 'failed', deactivate: !recoveredMeanwhile };
}
