import { ManualClock } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { DeliveryWorker, eventCreatedAt } from './worker';

const HOUR_MS = 3_600_000;
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };

/** A store whose claims find nothing; `onClaim` runs while each claim is in flight. */
function fakeStore(onClaim: (n: number) => void) {
  let claims = 0;
  return {
    get claims() {
      return claims;
    },
    store: {
      cancelInactiveDue: async () => 0,
      nextDueAt: async () => null,
      claim: async () => {
        claims++;
        onClaim(claims);
        return { claimed: [], held: { rate: 0, inFlight: 0 }, wakeAt: null };
      },
    },
  };
}

describe('DeliveryWorker.nudge', () => {
  it('a nudge that arrives while a claim is in flight is not lost: the next claim follows at once', async () => {
    let worker: DeliveryWorker | undefined;
    let secondClaim: () => void = () => undefined;
    const claimedTwice = new Promise<void>((resolve) => {
      secondClaim = resolve;
    });
    const fake = fakeStore((n) => {
      if (n === 1) worker?.nudge();
      if (n === 2) secondClaim();
    });
    worker = new DeliveryWorker({
      store: fake.store as never,
      sender: {} as never,
      clock: new ManualClock(Date.parse('2026-11-20T10:00:00.000Z')),
      logger: silent as never,
      schedule: [60_000],
      concurrency: 4,
      // Without the latched nudge the loop would sleep for an hour after the first claim.
      pollMs: HOUR_MS,
      leaseMs: 60_000,
      userAgent: 'test',
    });
    worker.start();
    await claimedTwice;
    expect(fake.claims).toBe(2);
    await worker.stop();
  }, 5000);
});

describe('eventCreatedAt', () => {
  it('reads the envelope in the contract order from its start, and parses a body in another shape', () => {
    const at = Date.parse('2026-11-27T05:00:00.123Z');
    expect(eventCreatedAt('{"id":"evt_1","type":"violation.new","created_at":"2026-11-27T05:00:00.123Z","data":{"x":1}}')).toBe(at);
    // Another key order: the top-level created_at, not the one in data.
    expect(eventCreatedAt('{"data":{"created_at":"2020-01-01T00:00:00Z"},"created_at":"2026-11-27T05:00:00.123Z","id":"evt_1"}')).toBe(at);
    expect(eventCreatedAt('{"id":"evt_1","type":"violation.new","created_at":"not a date","data":{}}')).toBeUndefined();
    expect(eventCreatedAt('not json')).toBeUndefined();
  });
});
