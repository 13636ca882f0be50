/**
 * Waiting in background loops (relays, consumers, workers): a sleep that another part of the
 * service can cut short, and `waitAtMost`, the bounded wait of a shutdown or a readiness check.
 * The delays of those waits after failures are `Backoff` (./backoff).
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

/**
 * Waits for `work`, but at most `ms` (the bounded waits of a shutdown): true when it settled in
 * time, false when the bound came first. A rejection of `work` in time is passed on. The timer is
 * cancelled either way, so a finished wait leaves nothing behind.
 */
export async function waitAtMost(work: Promise<unknown>, ms: number, timer: Timer = realTimer): Promise<boolean> {
  let cancel: (() => void) | undefined;
  const bound = new Promise<false>((resolve) => {
    cancel = timer(ms, () => resolve(false));
  });
  try {
    return await Promise.race([work.then(() => true as const), bound]);
  } finally {
    cancel?.();
  }
}
