import { ManualClock } from '@fcd/service-kit';
import { type ClaimedDelivery, type ClaimRef, generateSecret, type RecordOutcome, startDeadline } from '@fcd/webhooks';
import { describe, expect, it } from 'vitest';
import { eventCreatedAt } from '../domain/envelope';
import { createDispatcherMetrics } from '../metrics';
import type { SendResult } from './sender';
import { NO_TIMINGS } from './timing';
import { DeliveryWorker } from './worker';

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

describe('DeliveryWorker: the start bound of rate-limited deliveries', () => {
  const T = Date.parse('2026-11-27T09:00:00.000Z');
  const secret = generateSecret();

  function delivery(id: string, startBy: number | null): ClaimedDelivery {
    const body = JSON.stringify({ id: `evt_${id}`, type: 'violation.new', created_at: new Date(T).toISOString(), data: {} });
    return {
      id,
      subscriptionId: `wh_${id}`,
      accountId: 'acct_1',
      eventId: `evt_${id}`,
      eventType: 'violation.new',
      body,
      attempt: 1,
      manual: false,
      firstAttemptAt: T,
      createdAt: T,
      url: 'https://hooks.example.com/fcd',
      secret,
      secrets: [secret],
      traceContext: null,
      startBy,
      claim: { id, attempt: 1, previousFirstAttemptAt: null, previousLastAttemptAt: null },
    };
  }

  const ok = (headers: Record<string, string>): SendResult => ({
    status: 204,
    success: true,
    error: null,
    kind: null,
    durationMs: 1,
    retryAfterMs: null,
    permanent: false,
    requestHeaders: headers,
    responseHeaders: {},
    responseHeadersTruncated: false,
    responseBody: '',
    responseBodyTruncated: false,
    timings: NO_TIMINGS,
  });

  /**
   * One claim of `make(issuedAt)`'s deliveries; `claimMs` passes on the clock while the claim is
   * out, `admitMs` while they are admitted (the local queueing before the send), `connectMs` while
   * the sender's connection comes up (before it asks its start gate). Resolves once every delivery
   * was sent or given back and the worker stopped.
   */
  async function runOnce(make: (issuedAt: number) => ClaimedDelivery[], claimMs: number, admitMs: number, connectMs = 0) {
    const clock = new ManualClock(T);
    const metrics = createDispatcherMetrics();
    const sent: string[] = [];
    const released: Array<{ claims: readonly ClaimRef[]; now: number; dueAt: number }> = [];
    const recorded: string[] = [];
    let claims = 0;
    let expected = 0;
    let settle: () => void = () => undefined;
    const settled = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const check = () => {
      if (sent.length + released.flatMap((r) => r.claims).length === expected) settle();
    };
    const store = {
      cancelInactiveDue: async () => 0,
      nextDueAt: async () => null,
      claim: async (_now: number, _limit: number, _lease: number, _answered: readonly string[], issueClock: () => number) => {
        claims++;
        if (claims > 1) return { claimed: [], held: { rate: 0, inFlight: 0 }, wakeAt: null };
        const issuedAt = issueClock();
        clock.advance(claimMs);
        const claimed = make(issuedAt);
        expected = claimed.length;
        return { claimed, held: { rate: 0, inFlight: 0 }, wakeAt: null };
      },
      releaseClaims: async (refs: readonly ClaimRef[], now: number, dueAt: number) => {
        released.push({ claims: refs, now, dueAt });
        check();
        return refs.length;
      },
      recordAttempts: async (items: Array<{ claimed: ClaimedDelivery }>): Promise<RecordOutcome[]> => {
        recorded.push(...items.map((i) => i.claimed.id));
        return items.map(() => ({ decision: { status: 'succeeded' }, applied: true, deactivated: false, cancelled: 0 }));
      },
    };
    const worker = new DeliveryWorker({
      store: store as never,
      sender: {
        send: async (_url: string, _body: string, headers: Record<string, string>, mayStart?: () => boolean) => {
          clock.advance(connectMs);
          if (mayStart && !mayStart()) return { ...ok(headers), status: null, success: false, kind: 'late_start' };
          sent.push(headers['x-service-delivery-id'] as string);
          check();
          return ok(headers);
        },
      } as never,
      clock,
      logger: silent as never,
      metrics,
      schedule: [60_000],
      concurrency: 8,
      pollMs: HOUR_MS,
      leaseMs: 60_000,
      userAgent: 'test',
      admit: async (claimed) => {
        clock.advance(admitMs);
        return claimed;
      },
    });
    worker.start();
    await settled;
    await worker.stop();
    const late = (await metrics.rateLimitedLateStarts.get()).values[0]?.value ?? 0;
    return { sent: sent.sort(), released, recorded: recorded.sort(), late, claims, now: clock.now() };
  }

  it('a send that would start past the bound is given back, not sent; one on time and one without a rate limit are sent', async () => {
    // The claim took 30 ms: past the 25 ms of a 100/s subscription (a burst), within the 50 ms of a 5/s one.
    const r = await runOnce(
      (at) => [delivery('dlv_fast', startDeadline(100, at)), delivery('dlv_slow', startDeadline(5, at)), delivery('dlv_free', null)],
      30,
      0,
    );
    expect(r.sent).toEqual(['dlv_free', 'dlv_slow']);
    expect(r.recorded).toEqual(['dlv_free', 'dlv_slow']);
    // Given back as claimed (attempt number and previous times restored), due at once: the claim's pacing holds it.
    expect(r.released).toEqual([{ claims: [delivery('dlv_fast', null).claim], now: T + 30, dueAt: T + 30 }]);
    expect(r.late).toBe(1);
    // Claimed again without waiting for the poll (an hour).
    expect(r.claims).toBeGreaterThanOrEqual(2);
  }, 5000);

  it('the bound counts the local queueing after the claim too: a slow admission makes every rate-limited start late', async () => {
    const r = await runOnce(
      (at) => [delivery('dlv_a', startDeadline(5, at)), delivery('dlv_b', startDeadline(5, at)), delivery('dlv_free', null)],
      10,
      41,
    );
    expect(r.sent).toEqual(['dlv_free']);
    // Both in one statement.
    expect(r.released.map((x) => x.claims.map((c) => c.id).sort())).toEqual([['dlv_a', 'dlv_b']]);
    expect(r.late).toBe(2);
  }, 5000);

  it('the bound counts the connection too: a send whose connection comes up past it is stopped at the gate and given back', async () => {
    // Claimed in 10 ms, admitted in 10: on time before the send; the connection's 35 ms end past the 50 ms of a 5/s subscription.
    const r = await runOnce((at) => [delivery('dlv_rate', startDeadline(5, at)), delivery('dlv_free', null)], 10, 10, 35);
    expect(r.sent).toEqual(['dlv_free']);
    expect(r.recorded).toEqual(['dlv_free']);
    expect(r.released.map((x) => x.claims.map((c) => c.id))).toEqual([['dlv_rate']]);
    expect(r.late).toBe(1);
  }, 5000);

  it('a connection that comes up exactly at the bound is on time', async () => {
    const r = await runOnce((at) => [delivery('dlv_edge', startDeadline(5, at))], 10, 10, 30);
    expect(r.sent).toEqual(['dlv_edge']);
    expect(r.released).toEqual([]);
    expect(r.late).toBe(0);
  }, 5000);

  it('a start exactly at the bound is on time', async () => {
    const r = await runOnce((at) => [delivery('dlv_edge', startDeadline(5, at))], 20, 30);
    expect(r.sent).toEqual(['dlv_edge']);
    expect(r.released).toEqual([]);
    expect(r.late).toBe(0);
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
