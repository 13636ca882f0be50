import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock';
import { manualTimer } from './manual-timer';
import { aborted, loopWorker, onStopWorker, periodicWorker, Supervisor, type Worker } from './worker';

function recordingLogger() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  return {
    lines,
    logger: {
      warn: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'warn', obj, msg }),
      error: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'error', obj, msg }),
    } as never,
  };
}

/** Lets every pending promise callback run. */
const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

/** A worker that records its runs and stops, and fails when the test says so. */
function scriptedWorker(name: string, log: string[]) {
  let fail: ((err: Error) => void) | undefined;
  const worker: Worker = {
    name,
    run: (signal) =>
      new Promise<void>((resolve, reject) => {
        log.push(`${name} runs`);
        let failed = false;
        fail = (err) => {
          failed = true;
          reject(err);
        };
        void aborted(signal).then(() => {
          if (failed) return;
          log.push(`${name} stops`);
          resolve();
        });
      }),
  };
  return { worker, fail: (message: string) => fail?.(new Error(message)) };
}

const restart = { initialMs: 100, maxMs: 1000 };

describe('Supervisor', () => {
  it('runs every worker in order and stops them in reverse order, each after the later one returned', async () => {
    const log: string[] = [];
    const { timer } = manualTimer();
    const a = scriptedWorker('a', log);
    const b = scriptedWorker('b', log);
    const supervisor = new Supervisor([a.worker, b.worker], { ...recordingLogger(), shutdownTimeoutMs: 5000, restart, timer });
    supervisor.start();
    expect(log).toEqual(['a runs', 'b runs']);
    expect(supervisor.health()).toEqual({ a: { state: 'running', failures: 0 }, b: { state: 'running', failures: 0 } });
    await supervisor.stop();
    expect(log).toEqual(['a runs', 'b runs', 'b stops', 'a stops']);
    expect(supervisor.health()).toEqual({ a: { state: 'stopped', failures: 0 }, b: { state: 'stopped', failures: 0 } });
  });

  it('runs a failed worker again after the backoff, doubling while it keeps failing at once', async () => {
    const log: string[] = [];
    const { timer, fireNext } = manualTimer();
    const { logger, lines } = recordingLogger();
    const clock = new ManualClock(0);
    const a = scriptedWorker('a', log);
    const supervisor = new Supervisor([a.worker], { logger, shutdownTimeoutMs: 5000, restart, timer, clock });
    supervisor.start();
    a.fail('boom');
    await flush();
    expect(supervisor.health()).toEqual({ a: { state: 'restarting', failures: 1, lastError: 'boom' } });
    expect(lines).toEqual([
      { level: 'error', obj: { worker: 'a', err: { message: 'boom' }, restartInMs: 100 }, msg: 'worker failed; running it again' },
    ]);
    expect(fireNext()).toBe(100);
    await flush();
    expect(log).toEqual(['a runs', 'a runs']);
    expect(supervisor.health().a?.state).toBe('running');
    a.fail('again');
    await flush();
    expect(fireNext()).toBe(200);
    await flush();
    // A run longer than the backoff's cap was healthy: the next failure starts from the first delay.
    clock.advance(1000);
    a.fail('later');
    await flush();
    expect(supervisor.health()).toEqual({ a: { state: 'restarting', failures: 1, lastError: 'later' } });
    expect(fireNext()).toBe(100);
    await flush();
    await supervisor.stop();
    expect(log).toEqual(['a runs', 'a runs', 'a runs', 'a runs', 'a stops']);
  });

  it('counts a worker that returns before it was stopped as failed', async () => {
    const { timer, live } = manualTimer();
    const { logger, lines } = recordingLogger();
    const supervisor = new Supervisor([{ name: 'quitter', run: async () => undefined }], {
      logger,
      shutdownTimeoutMs: 5000,
      restart,
      timer,
    });
    supervisor.start();
    await flush();
    expect(supervisor.health()).toEqual({ quitter: { state: 'restarting', failures: 1, lastError: 'returned before it was stopped' } });
    expect(lines.map((l) => l.msg)).toEqual(['worker failed; running it again']);
    // Stopping ends the wait before the next run: no timer is left behind.
    await supervisor.stop();
    expect(live()).toEqual([]);
    expect(supervisor.health().quitter?.state).toBe('stopped');
  });

  it('abandons a worker still running at the shutdown timeout, and still stops the ones before it', async () => {
    const log: string[] = [];
    const { timer, live, fireNext } = manualTimer();
    const { logger, lines } = recordingLogger();
    const a = scriptedWorker('a', log);
    const stuck: Worker = { name: 'stuck', run: () => new Promise(() => undefined) };
    const clock = new ManualClock(0);
    const supervisor = new Supervisor([a.worker, stuck], { logger, shutdownTimeoutMs: 5000, restart, timer, clock });
    supervisor.start();
    const stopped = supervisor.stop();
    await flush();
    expect(live().map((t) => t.ms)).toEqual([5000]);
    expect(log).toEqual(['a runs']);
    clock.advance(5000);
    fireNext();
    await stopped;
    expect(log).toEqual(['a runs', 'a stops']);
    expect(lines).toEqual([
      {
        level: 'error',
        obj: { worker: 'stuck', shutdownTimeoutMs: 5000 },
        msg: 'worker still running at the shutdown timeout; not waited for',
      },
    ]);
  });

  it('refuses two workers of the same name', () => {
    const w: Worker = { name: 'relay', run: async () => undefined };
    expect(() => new Supervisor([w, w], { ...recordingLogger(), shutdownTimeoutMs: 1 })).toThrow('two workers are named relay');
  });
});

describe('workers', () => {
  it('periodicWorker runs its task at once, then an interval after each run, and stopping waits for the run in flight', async () => {
    const { timer, live, fireNext } = manualTimer();
    let runs = 0;
    let finish: (() => void) | undefined;
    const worker = periodicWorker(
      'flush',
      250,
      () =>
        new Promise<void>((resolve) => {
          runs++;
          finish = resolve;
        }),
      { timer },
    );
    const controller = new AbortController();
    const running = worker.run(controller.signal);
    expect(runs).toBe(1);
    finish?.();
    await flush();
    expect(live().map((t) => t.ms)).toEqual([250]);
    fireNext();
    await flush();
    expect(runs).toBe(2);
    controller.abort();
    let returned = false;
    void running.then(() => {
      returned = true;
    });
    await flush();
    expect(returned).toBe(false);
    finish?.();
    await flush();
    expect(returned).toBe(true);
    expect(runs).toBe(2);
  });

  it('periodicWorker with immediately: false waits an interval first', async () => {
    const { timer, live } = manualTimer();
    let runs = 0;
    const controller = new AbortController();
    const running = periodicWorker('prune', 60_000, () => runs++, { immediately: false, timer }).run(controller.signal);
    await flush();
    expect(runs).toBe(0);
    expect(live().map((t) => t.ms)).toEqual([60_000]);
    controller.abort();
    await running;
    expect(runs).toBe(0);
  });

  it('onStopWorker and loopWorker do their stopping when aborted, not before', async () => {
    const log: string[] = [];
    const controller = new AbortController();
    const a = onStopWorker('server', () => log.push('server closed')).run(controller.signal);
    const b = loopWorker('loop', { start: () => log.push('loop started'), stop: async () => log.push('loop stopped') }).run(
      controller.signal,
    );
    await flush();
    expect(log).toEqual(['loop started']);
    controller.abort();
    await Promise.all([a, b]);
    expect(log).toEqual(['loop started', 'server closed', 'loop stopped']);
  });
});
