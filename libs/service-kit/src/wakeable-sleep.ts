/**
 * Waiting in background loops (relays, consumers, workers): a sleep that another part of the
 * service can cut short, and a capped, jittered exponential backoff for the waits after failures.
 */

/** Starts a timer; returns the function that cancels it. Injected so tests never wait. */
export type Timer = (ms: number, fire: () => void) => () => void;

export const realTimer: Timer = (ms, fire) => {
  const t = setTimeout(fire, ms);
  return () => clearTimeout(t);
};

/**
 * A sleep that `wake()` ends at once. A wake that arrives while nobody sleeps is latched: the
 * next `sleep()` returns immediately (and consumes it), so a nudge sent while the loop is busy
 * (e.g. a claim in flight) is never lost.
 */
export class WakeableSleep {
  private pendingWake = false;
  private resolveCurrent: (() => void) | undefined;

  constructor(private readonly timer: Timer = realTimer) {}

  /** Resolves after `ms`, or as soon as `wake()` is called (or was called since the last sleep). */
  sleep(ms: number): Promise<void> {
    if (this.pendingWake || ms <= 0) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      let cancel: (() => void) | undefined;
      const done = () => {
        cancel?.();
        if (this.resolveCurrent === done) this.resolveCurrent = undefined;
        resolve();
      };
      this.resolveCurrent = done;
      cancel = this.timer(ms, done);
    });
  }

  /** Ends the current sleep, or makes the next one return at once. */
  wake(): void {
    const current = this.resolveCurrent;
    if (current) current();
    else this.pendingWake = true;
  }

  /** Whether a wake is latched for the next sleep. */
  get pending(): boolean {
    return this.pendingWake;
  }
}

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

/** Capped exponential backoff with jitter: `next()` after each failure, `reset()` after a success. */
export class Backoff {
  private attempt = 0;

  constructor(private readonly o: BackoffOptions) {}

  /** The delay before the next try (ms). */
  next(): number {
    const ceiling = Math.min(this.o.maxMs, this.o.initialMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    const jitter = Math.min(1, Math.max(0, this.o.jitter ?? 0));
    if (jitter === 0) return ceiling;
    const random = this.o.random ?? Math.random;
    return Math.round(ceiling * (1 - jitter * random()));
  }

  reset(): void {
    this.attempt = 0;
  }

  /** Failures since the last reset (0 = the last try succeeded). */
  get failures(): number {
    return this.attempt;
  }
}
