import { describe, expect, it } from 'vitest';
import { checkReadiness } from './health';
import { manualTimer } from './manual-timer';

describe('checkReadiness', () => {
  it('names a hung check down with its timeout, the others up, and is not ready', async () => {
    const { timer, fireAll } = manualTimer();
    const checks = { postgres: async () => undefined, nats: () => new Promise(() => undefined) };
    const checking = checkReadiness(checks, 750, [], timer);
    // One turn of the event loop: the settled check has answered; the hung one never will.
    await new Promise((r) => setImmediate(r));
    fireAll();
    expect(await checking).toEqual({
      ready: false,
      checks: { postgres: { status: 'up' }, nats: { status: 'down', error: 'timed out after 750 ms' } },
    });
  });

  it('reports a failed check without its URL, and is ready when only an optional check is down', async () => {
    const failing = async () => {
      throw new Error('connect ECONNREFUSED redis://user:secret@cache:6379');
    };
    const report = await checkReadiness({ postgres: async () => undefined, redis: failing }, 1000, ['redis']);
    expect(report).toEqual({
      ready: true,
      checks: { postgres: { status: 'up' }, redis: { status: 'down', error: 'connect ECONNREFUSED <url>' } },
    });
  });
});
