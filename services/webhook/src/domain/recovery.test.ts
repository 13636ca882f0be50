import { describe, expect, it } from 'vitest';
import { RecoveryGate, recoveryInProgress, recoveryWindow } from './recovery';

describe('recovery window', () => {
  const now = Date.parse('2026-11-25T12:00:00.000Z');
  const day = 86_400_000;

  it('reads [since, until) with until defaulting to now', () => {
    expect(recoveryWindow({ since: '2026-11-24T12:00:00Z' }, now, 30)).toEqual({
      problems: [],
      window: { since: now - day, until: now },
    });
    expect(recoveryWindow({ since: '2026-11-24T12:00:00+01:00', until: '2026-11-25T00:00:00.500Z' }, now, 30)).toEqual({
      problems: [],
      window: { since: now - day - 3_600_000, until: Date.parse('2026-11-25T00:00:00.500Z') },
    });
  });

  it('refuses a start before the retention, naming the earliest allowed time; the boundary itself is allowed', () => {
    const oldest = new Date(now - 7 * day).toISOString();
    expect(recoveryWindow({ since: oldest }, now, 7).window).toEqual({ since: now - 7 * day, until: now });
    expect(recoveryWindow({ since: new Date(now - 7 * day - 1).toISOString() }, now, 7)).toEqual({
      problems: [{ field: 'since', message: `must be within the event retention of 7 days: on or after ${oldest}` }],
    });
  });

  it('refuses an empty or inverted window, and a start in the future without until', () => {
    expect(recoveryWindow({ since: '2026-11-25T10:00:00Z', until: '2026-11-25T10:00:00Z' }, now, 30).problems).toEqual([
      { field: 'until', message: 'must be later than since' },
    ]);
    expect(recoveryWindow({ since: '2026-11-25T13:00:00Z' }, now, 30).problems).toEqual([
      { field: 'since', message: 'must be in the past (until defaults to now)' },
    ]);
  });

  it('reports a time that does not parse (a leap second) and leaves other types to the schema', () => {
    expect(recoveryWindow({ since: '2026-11-24T23:59:60Z' }, now, 30).problems).toEqual([
      { field: 'since', message: 'must be an RFC 3339 date-time' },
    ]);
    expect(recoveryWindow({ since: 42 }, now, 30)).toEqual({ problems: [] });
  });

  it('refuses what Date.parse takes but RFC 3339 does not (a date alone, prose, no zone)', () => {
    for (const since of ['2026-11-20', 'Nov 20 2026', '2026-11-20T10:00:00']) {
      expect(recoveryWindow({ since }, now, 30).problems, since).toEqual([{ field: 'since', message: 'must be an RFC 3339 date-time' }]);
    }
    expect(recoveryWindow({ since: '2026-11-20T10:00:00+02:00' }, now, 30).problems).toEqual([]);
    expect(recoveryWindow({}, now, 30)).toEqual({ problems: [] });
  });

  it('refuses impossible dates instead of rolling them over, as GET /v1/events does (2026-02-29, T24:00)', () => {
    const at = Date.parse('2026-03-05T00:00:00.000Z');
    for (const since of [
      '2026-02-29T00:00:00Z',
      '2026-03-01T24:00:00Z',
      '2026-02-30T10:00:00Z',
      '2026-03-01T10:60:00Z',
      '2026-13-01T00:00:00Z',
    ]) {
      expect(recoveryWindow({ since }, at, 30).problems, since).toEqual([{ field: 'since', message: 'must be an RFC 3339 date-time' }]);
    }
    expect(recoveryWindow({ since: '2026-03-01T00:00:00Z', until: '2026-03-01T24:00:00Z' }, at, 30).problems).toEqual([
      { field: 'until', message: 'must be an RFC 3339 date-time' },
    ]);
    // A real leap day is fine.
    expect(recoveryWindow({ since: '2028-02-29T23:59:59.999Z' }, Date.parse('2028-03-01T00:00:00Z'), 30).window?.since).toBe(
      Date.parse('2028-02-29T23:59:59.999Z'),
    );
  });
});

describe('recovery conflicts', () => {
  it('answers 409 LIMIT_REACHED with Retry-After up to the last recovered delivery, at least 1 s', () => {
    const now = Date.parse('2026-11-25T12:00:00.000Z');
    const pending = recoveryInProgress(now, now + 12_345);
    expect([pending.status, pending.code, pending.retryAfterSeconds]).toEqual([409, 'LIMIT_REACHED', 13]);
    expect(pending.details).toEqual({ limit: 'recovery_in_progress', last_due_at: '2026-11-25T12:00:12.345Z' });
    expect(recoveryInProgress(now).retryAfterSeconds).toBe(1);
    expect(recoveryInProgress(now, now - 5000).retryAfterSeconds).toBe(1);
  });
});

describe('RecoveryGate', () => {
  it('runs at most `limit` at once, the others in arrival order as slots free up', async () => {
    const gate = new RecoveryGate(2);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const releases: Array<() => void> = [];
    const work = (i: number) =>
      gate.run(async () => {
        running += 1;
        most = Math.max(most, running);
        order.push(i);
        await new Promise<void>((resolve) => releases.push(resolve));
        running -= 1;
        return i;
      });
    const all = Promise.all([0, 1, 2, 3, 4].map(work));
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    await settle();
    expect(order).toEqual([0, 1]);
    while (releases.length > 0) {
      releases.shift()?.();
      await settle();
    }
    expect(await all).toEqual([0, 1, 2, 3, 4]);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
  });

  it('frees the slot when the work fails', async () => {
    const gate = new RecoveryGate(1);
    await expect(gate.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await gate.run(async () => 'next')).toBe('next');
  });

  it('refuses with 503 and Retry-After once maxWaiting calls already wait, and takes calls again when they drain', async () => {
    const gate = new RecoveryGate(1, 2);
    let release: () => void = () => undefined;
    const first = gate.run(() => new Promise<string>((resolve) => (release = () => resolve('first'))));
    const waiters = [gate.run(async () => 'second'), gate.run(async () => 'third')];
    await expect(gate.run(async () => 'fourth')).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, retryAfterSeconds: 5 });
    release();
    expect(await Promise.all([first, ...waiters])).toEqual(['first', 'second', 'third']);
    expect(await gate.run(async () => 'fifth')).toBe('fifth');
  });
});
