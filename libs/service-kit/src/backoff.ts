import { setTimeout as delay } from 'node:timers/promises';
import { type Clock, systemClock } from './clock';

/**
 * The one backoff of the code base: every wait after a failure (connections, background loops,
 * `withRetry`, the gateway's wait for an idempotent answer) takes its delays from `Backoff`.
 */

export interface BackoffOptions {
  /** The first delay (ms); doubled after each failure. */
  initialMs: number;
  /** The cap (ms). */
  maxMs: number;
  /** In [0, 1]: each delay is drawn from [delay·(1 − jitter), delay] (default 0: no jitter). */
  jitter?: number;
  /** Random source in [0, 1) (default Math.random). */
  random?: () => number;
}

/** The delay after `failures` failures before it (0 for the first): capped doubling, then jitter. */
export function backoffDelay(failures: number, o: BackoffOptions): number {
  const ceiling = Math.min(o.maxMs, o.initialMs * 2 ** Math.min(failures, 30));
  const jitter = Math.min(1, Math.max(0, o.jitter ?? 0));
  if (jitter === 0) return ceiling;
  const random = o.random ?? Math.random;
  return Math.round(ceiling * (1 - jitter * random()));
}

/** Capped exponential backoff with jitter: `next()` after each failure, `reset()` after a success. */
export class Backoff {
  private attempt = 0;

  constructor(private readonly o: BackoffOptions) {}

  /** The delay before the next try (ms). */
  next(): number {
    return backoffDelay(this.attempt++, this.o);
  }

  reset(): void {
    this.attempt = 0;
  }

  /** Failures since the last reset (0 = the last try succeeded). */
  get failures(): number {
    return this.attempt;
  }
}

export interface PollOptions {
  /** The delays between tries. */
  backoff: Backoff;
  /** Give up once the next wait would end more than this long (ms) after the first try. */
  waitMs: number;
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Tries `attempt` until it returns a value, waiting the backoff's delays in between; undefined
 * when the next wait would pass the deadline (the caller answers "still busy").
 */
export async function pollWithBackoff<T>(attempt: () => Promise<T | undefined>, o: PollOptions): Promise<T | undefined> {
  const clock = o.clock ?? systemClock;
  const sleep = o.sleep ?? ((ms: number) => delay(ms));
  const deadline = clock.now() + o.waitMs;
  for (;;) {
    const result = await attempt();
    if (result !== undefined) return result;
    const delay = o.backoff.next();
    if (clock.now() + delay > deadline) return undefined;
    await sleep(delay);
  }
}
