import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay, pollWithBackoff } from './backoff';
import { ManualClock } from './clock';

describe('Backoff', () => {
  it('doubles from the initial delay up to the cap, and reset starts over', () => {
    const b = new Backoff({ initialMs: 200, maxMs: 2000 });
    expect([b.next(), b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([200, 400, 800, 1600, 2000, 2000]);
    expect(b.failures).toBe(6);
    b.reset();
    expect(b.failures).toBe(0);
    expect(b.next()).toBe(200);
  });

  it('jitter draws each delay from [delay·(1 − jitter), delay] with the injected random', () => {
    const draws = [0, 0.5, 0.2];
    const b = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.5, random: () => draws.shift() ?? 0 });
    expect([b.next(), b.next(), b.next()]).toEqual([1000, 750, 900]);
  });

  it('never overflows after many failures', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 5000 });
    for (let i = 0; i < 2000; i++) b.next();
    expect(b.next()).toBe(5000);
  });
});

describe('backoffDelay', () => {
  it('is the delay after n failures: capped doubling, jitter taken off the top', () => {
    const o = { initialMs: 20, maxMs: 250 };
    expect([0, 1, 2, 3, 4, 5].map((n) => backoffDelay(n, o))).toEqual([20, 40, 80, 160, 250, 250]);
    expect(backoffDelay(2, { ...o, jitter: 0.5, random: () => 0.5 })).toBe(60);
    expect(backoffDelay(2, { ...o, jitter: 3, random: () => 0.5 })).toBe(40);
  });
});

/** A clock that the injected sleep advances: no real waiting. */
function fakeTime() {
  const clock = new ManualClock(1000);
  const waits: number[] = [];
  const sleep = async (ms: number) => {
    waits.push(ms);
    clock.advance(ms);
  };
  return { clock, waits, sleep };
}

describe('pollWithBackoff', () => {
  it('tries again after each backoff delay until the attempt returns a value', async () => {
    const t = fakeTime();
    let tries = 0;
    const got = await pollWithBackoff(async () => (++tries === 4 ? 'answer' : undefined), {
      backoff: new Backoff({ initialMs: 20, maxMs: 250 }),
      waitMs: 1000,
      ...t,
    });
    expect(got).toBe('answer');
    expect(tries).toBe(4);
    expect(t.waits).toEqual([20, 40, 80]);
  });

  it('gives up (undefined) instead of a wait that would end past the deadline', async () => {
    const t = fakeTime();
    let tries = 0;
    const got = await pollWithBackoff(
      async () => {
        tries++;
        return undefined;
      },
      { backoff: new Backoff({ initialMs: 20, maxMs: 250 }), waitMs: 300, ...t },
    );
    expect(got).toBeUndefined();
    // 20 + 40 + 80 + 160 ms end exactly at the deadline; the next wait (250 ms) would pass it.
    expect(t.waits).toEqual([20, 40, 80, 160]);
    expect(tries).toBe(5);
    expect(t.clock.now()).toBe(1300);
  });

  it('returns the first answer without waiting', async () => {
    const t = fakeTime();
    expect(await pollWithBackoff(async () => 0, { backoff: new Backoff({ initialMs: 20, maxMs: 250 }), waitMs: 0, ...t })).toBe(0);
    expect(t.waits).toEqual([]);
  });
});
