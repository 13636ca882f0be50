import { describe, expect, it } from 'vitest';
import { errMessage } from './errors';
import { manualTimer } from './manual-timer';
import { WakeableSleep, waitAtMost } from './wakeable-sleep';

/** Whether the promise settled by the time the microtasks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => {
    done = true;
  });
  await Promise.resolve();
  await Promise.resolve();
  return done;
}

describe('WakeableSleep', () => {
  it('resolves when its timer fires', async () => {
    const { timer, timers } = manualTimer();
    const s = new WakeableSleep(timer);
    const p = s.sleep(500);
    expect(timers.map((t) => t.ms)).toEqual([500]);
    expect(await settled(p)).toBe(false);
    timers[0]?.fire();
    expect(await settled(p)).toBe(true);
  });

  it('wake() ends the current sleep at once and cancels its timer', async () => {
    const { timer, timers } = manualTimer();
    const s = new WakeableSleep(timer);
    const p = s.sleep(500);
    s.wake();
    expect(await settled(p)).toBe(true);
    expect(timers[0]?.cancelled).toBe(true);
    expect(s.pending).toBe(false);
  });

  it('latches a wake that arrives while nobody sleeps: the next sleep returns at once, once', async () => {
    const { timer, timers } = manualTimer();
    const s = new WakeableSleep(timer);
    s.wake();
    s.wake();
    expect(s.pending).toBe(true);
    expect(await settled(s.sleep(500))).toBe(true);
    expect(timers).toHaveLength(0);
    expect(s.pending).toBe(false);
    const next = s.sleep(500);
    expect(await settled(next)).toBe(false);
    expect(timers).toHaveLength(1);
  });

  it('a wake after a sleep ended by its timer is latched for the next one', async () => {
    const { timer, timers } = manualTimer();
    const s = new WakeableSleep(timer);
    const p = s.sleep(100);
    timers[0]?.fire();
    await p;
    s.wake();
    expect(await settled(s.sleep(100))).toBe(true);
  });

  it('a sleep of 0 ms returns at once without a timer', async () => {
    const { timer, timers } = manualTimer();
    const s = new WakeableSleep(timer);
    expect(await settled(s.sleep(0))).toBe(true);
    expect(timers).toHaveLength(0);
  });
});

describe('waitAtMost', () => {
  it('is true when the work settles first, and cancels its timer', async () => {
    const { timer, timers } = manualTimer();
    let finish: () => void = () => undefined;
    const wait = waitAtMost(new Promise<void>((r) => (finish = r)), 5000, timer);
    expect(await settled(wait)).toBe(false);
    finish();
    expect(await wait).toBe(true);
    expect(timers.map((t) => [t.ms, t.cancelled])).toEqual([[5000, true]]);
  });

  it('is false when the bound comes first, the work still pending', async () => {
    const { timer, timers } = manualTimer();
    const wait = waitAtMost(new Promise<void>(() => undefined), 3000, timer);
    expect(await settled(wait)).toBe(false);
    timers[0]?.fire();
    expect(await wait).toBe(false);
  });

  it('passes on a rejection that comes in time, and cancels its timer', async () => {
    const { timer, timers } = manualTimer();
    await expect(waitAtMost(Promise.reject(new Error('drain failed')), 1000, timer)).rejects.toThrow('drain failed');
    expect(timers[0]?.cancelled).toBe(true);
  });
});

describe('errMessage', () => {
  it('is the message of an Error, the string itself, or String(value)', () => {
    expect(errMessage(new Error('boom'))).toBe('boom');
    expect(errMessage('plain')).toBe('plain');
    expect(errMessage(42)).toBe('42');
    expect(errMessage(undefined)).toBe('undefined');
  });
});
