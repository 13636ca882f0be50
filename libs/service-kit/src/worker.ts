import type { Logger } from 'pino';
import { Backoff, type BackoffOptions } from './backoff';
import { type Clock, systemClock } from './clock';
import { errMessage } from './errors';
import { realTimer, type Timer } from './wakeable-sleep';

/**
 * The background work of a service (relays, consumers, periodic flushes, the servers' drains):
 * a list of workers under one `Supervisor`, which starts them, runs again one that fails, reports
 * their health, and stops them in reverse order within a shutdown timeout.
 */
export interface Worker {
  readonly name: string;
  /**
   * Runs until `signal` aborts, then returns once its current work is done. Throwing, or
   * returning before the abort, is a failure: the supervisor runs it again after a backoff.
   */
  run(signal: AbortSignal): Promise<void>;
}

/** Resolves when the signal aborts (at once when it already has). */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/** Resolves after `ms`, or as soon as the signal aborts. */
function sleepUnlessAborted(ms: number, signal: AbortSignal, timer: Timer): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      cancel();
      signal.removeEventListener('abort', done);
      resolve();
    };
    const cancel = timer(ms, done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * `task` at once (unless `immediately` is false), then `intervalMs` after each run ends, until
 * stopped; stopping waits for the run in flight. The task logs its own failures: one that throws
 * fails the worker (and the supervisor runs it again).
 */
export function periodicWorker(
  name: string,
  intervalMs: number,
  task: () => Promise<unknown> | unknown,
  options: { immediately?: boolean; timer?: Timer } = {},
): Worker {
  const timer = options.timer ?? realTimer;
  return {
    name,
    async run(signal) {
      if (options.immediately === false) await sleepUnlessAborted(intervalMs, signal, timer);
      while (!signal.aborted) {
        await task();
        await sleepUnlessAborted(intervalMs, signal, timer);
      }
    },
  };
}

/**
 * Nothing until stopped, then `stop`: for what runs on its own (a server, a loop with start() and
 * stop()) but must stop at its place in the supervisor's order.
 */
export function onStopWorker(name: string, stop: () => Promise<unknown> | unknown): Worker {
  return {
    name,
    async run(signal) {
      await aborted(signal);
      await stop();
    },
  };
}

/** A loop object with start() and stop() (resolving once its work is done) as a worker. */
export function loopWorker(name: string, loop: { start(): void; stop(): Promise<unknown> }): Worker {
  return {
    name,
    async run(signal) {
      loop.start();
      await aborted(signal);
      await loop.stop();
    },
  };
}

export type WorkerState = 'idle' | 'running' | 'restarting' | 'stopped';

export interface WorkerHealth {
  state: WorkerState;
  /** Failures since it last ran longer than the backoff's cap. */
  failures: number;
  lastError?: string;
}

export interface SupervisorOptions {
  logger: Pick<Logger, 'warn' | 'error'>;
  /**
   * How long stop() waits in all for the workers to return; the ones still running after it are
   * abandoned (logged). Default 20 s: within installShutdown's 25 s, so the steps after it
   * (closing pools) still run.
   */
  shutdownTimeoutMs?: number;
  /** Delays before a failed worker runs again (default 1 s doubling to 30 s, 20 % jitter); reset after a run longer than the cap. */
  restart?: BackoffOptions;
  clock?: Clock;
  timer?: Timer;
}

interface Entry {
  worker: Worker;
  controller: AbortController;
  health: WorkerHealth;
  done?: Promise<void>;
}

const DEFAULT_RESTART: BackoffOptions = { initialMs: 1000, maxMs: 30_000, jitter: 0.2 };
const DEFAULT_SHUTDOWN_TIMEOUT_MS = 20_000;

export class Supervisor {
  private readonly entries: Entry[];
  private readonly clock: Clock;
  private readonly timer: Timer;
  private readonly restart: BackoffOptions;
  private readonly shutdownTimeoutMs: number;

  constructor(
    workers: readonly Worker[],
    private readonly o: SupervisorOptions,
  ) {
    const names = workers.map((w) => w.name);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) throw new Error(`two workers are named ${twice}`);
    this.entries = workers.map((worker) => ({ worker, controller: new AbortController(), health: { state: 'idle', failures: 0 } }));
    this.clock = o.clock ?? systemClock;
    this.timer = o.timer ?? realTimer;
    this.restart = o.restart ?? DEFAULT_RESTART;
    this.shutdownTimeoutMs = o.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
  }

  /** Runs every worker, in the order given. */
  start(): void {
    for (const entry of this.entries) entry.done ??= this.keepRunning(entry);
  }

  /** Each worker's state, by name. */
  health(): Record<string, WorkerHealth> {
    return Object.fromEntries(this.entries.map((e) => [e.worker.name, { ...e.health }]));
  }

  private async keepRunning(entry: Entry): Promise<void> {
    const { signal } = entry.controller;
    const backoff = new Backoff(this.restart);
    while (!signal.aborted) {
      entry.health.state = 'running';
      const began = this.clock.now();
      let failure: string;
      try {
        await entry.worker.run(signal);
        if (signal.aborted) break;
        failure = 'returned before it was stopped';
      } catch (err) {
        if (signal.aborted) {
          this.o.logger.warn({ worker: entry.worker.name, err: { message: errMessage(err) } }, 'worker failed while stopping');
          break;
        }
        failure = errMessage(err);
      }
      if (this.clock.now() - began >= this.restart.maxMs) backoff.reset();
      const delayMs = backoff.next();
      entry.health = { state: 'restarting', failures: backoff.failures, lastError: failure };
      this.o.logger.error(
        { worker: entry.worker.name, err: { message: failure }, restartInMs: delayMs },
        'worker failed; running it again',
      );
      await sleepUnlessAborted(delayMs, signal, this.timer);
    }
    entry.health.state = 'stopped';
  }

  /**
   * Stops the workers in reverse order (the last started first), each after the one after it has
   * returned, all within the shutdown timeout; past it, the rest are told to stop and not waited for.
   */
  async stop(): Promise<void> {
    const deadline = this.clock.now() + this.shutdownTimeoutMs;
    for (const entry of [...this.entries].reverse()) {
      entry.controller.abort();
      if (!entry.done) {
        entry.health.state = 'stopped';
        continue;
      }
      // Past the deadline, a worker still gets the moment it needs to return at once.
      if (!(await this.settlesWithin(entry.done, Math.max(0, deadline - this.clock.now())))) {
        this.o.logger.error(
          { worker: entry.worker.name, shutdownTimeoutMs: this.shutdownTimeoutMs },
          'worker still running at the shutdown timeout; not waited for',
        );
      }
    }
  }

  private settlesWithin(done: Promise<void>, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const cancel = this.timer(ms, () => resolve(false));
      void done.then(() => {
        cancel();
        resolve(true);
      });
    });
  }
}
