import { describe, expect, it } from 'vitest';
import type { PauseOptions } from '../limits';
import { bookkeep, type DeliveryBefore, type SubscriptionBefore } from './bookkeeping';
import type { AttemptDecision, AttemptRecord, AttemptResult, ClaimedDelivery, DecisionInput } from './types';

const T0 = Date.UTC(2026, 10, 27, 0, 0, 0);
const PAUSE: PauseOptions = { threshold: 2, cooldownMs: 30_000 };

function claimed(id: string, subscriptionId: string, attempt = 1): ClaimedDelivery {
  return {
    id,
    subscriptionId,
    accountId: 'acc_1',
    eventId: `evt_${id}`,
    eventType: 'violation.new',
    body: '{}',
    attempt,
    manual: false,
    firstAttemptAt: T0,
    createdAt: T0,
    url: 'https://example.test/hook',
    secret: 's',
    secrets: ['s'],
    traceContext: null,
    startBy: null,
    claim: { id, attempt, previousFirstAttemptAt: null, previousLastAttemptAt: null },
  };
}

function result(startedAt: number, over: Partial<AttemptResult> = {}): AttemptResult {
  return { startedAt, finishedAt: startedAt + 100, durationMs: 100, responseStatus: 500, error: null, success: false, ...over };
}

const sub = (over: Partial<SubscriptionBefore> = {}): SubscriptionBefore => ({
  lastSuccessAt: null,
  isActive: true,
  pause: { connectionFailures: 0, pausedUntil: null, pauseReason: null },
  ...over,
});
const pending = (subscriptionId: string, attemptCount = 1): DeliveryBefore => ({ subscriptionId, status: 'pending', attemptCount });

/** Retries a minute after each failure; deactivates on attempt 3. */
function schedule(inputs: DecisionInput[]) {
  return (input: DecisionInput): AttemptDecision => {
    inputs.push(input);
    if (input.success) return { status: 'succeeded' };
    if (input.attempt >= 3) return { status: 'failed', deactivate: true };
    return { status: 'pending', nextAttemptAt: input.finishedAt + 60_000 };
  };
}

describe('bookkeep', () => {
  it('a success: delivery succeeded, counters reset, last success moved to the start of the attempt', () => {
    const inputs: DecisionInput[] = [];
    const items: AttemptRecord[] = [
      { claimed: claimed('d1', 'sub_a'), result: result(T0 + 1_000, { success: true, responseStatus: 200 }) },
    ];
    const b = bookkeep(
      items,
      { subscriptions: new Map([['sub_a', sub({ lastSuccessAt: T0 })]]), deliveries: new Map([['d1', pending('sub_a')]]) },
      schedule(inputs),
      PAUSE,
    );
    expect(inputs).toEqual([
      {
        attempt: 1,
        success: true,
        manual: false,
        finishedAt: T0 + 1_100,
        firstAttemptAt: T0,
        lastSuccessAt: T0,
        retryAfterMs: null,
        permanent: false,
      },
    ]);
    expect(b.outcomes).toEqual([{ decision: { status: 'succeeded' }, applied: true, deactivated: false, cancelled: 0, paused: null }]);
    expect(b.attempts).toEqual(items);
    expect(b.deliveries).toEqual([{ id: 'd1', status: 'succeeded', nextAttemptAt: null, at: T0 + 1_100 }]);
    expect(b.subscriptions).toEqual([
      {
        id: 'sub_a',
        reset: true,
        failures: 0,
        successAt: T0 + 1_000,
        failureAt: null,
        pause: { connectionFailures: 0, pausedUntil: null, pauseReason: null },
      },
    ]);
    expect(b.deactivations).toEqual([]);
  });

  it('failures: the delivery is rescheduled, failures are counted, a later item sees the earlier success', () => {
    const inputs: DecisionInput[] = [];
    const b = bookkeep(
      [
        { claimed: claimed('d1', 'sub_a'), result: result(T0) },
        { claimed: claimed('d2', 'sub_a'), result: result(T0 + 200, { success: true, responseStatus: 204 }) },
        { claimed: claimed('d3', 'sub_a'), result: result(T0 + 400) },
      ],
      {
        subscriptions: new Map([['sub_a', sub()]]),
        deliveries: new Map([
          ['d1', pending('sub_a')],
          ['d2', pending('sub_a')],
          ['d3', pending('sub_a')],
        ]),
      },
      schedule(inputs),
      PAUSE,
    );
    expect(inputs.map((i) => i.lastSuccessAt)).toEqual([null, null, T0 + 200]);
    expect(b.deliveries).toEqual([
      { id: 'd1', status: 'pending', nextAttemptAt: T0 + 60_100, at: T0 + 100 },
      { id: 'd2', status: 'succeeded', nextAttemptAt: null, at: T0 + 300 },
      { id: 'd3', status: 'pending', nextAttemptAt: T0 + 60_500, at: T0 + 500 },
    ]);
    expect(b.subscriptions).toEqual([
      {
        id: 'sub_a',
        reset: true,
        failures: 1,
        successAt: T0 + 200,
        failureAt: T0 + 500,
        pause: { connectionFailures: 0, pausedUntil: null, pauseReason: null },
      },
    ]);
  });

  it('does not apply an attempt whose delivery is gone, finished or claimed again', () => {
    const b = bookkeep(
      [
        { claimed: claimed('gone', 'sub_a'), result: result(T0) },
        { claimed: claimed('done', 'sub_a'), result: result(T0) },
        { claimed: claimed('again', 'sub_a', 1), result: result(T0) },
      ],
      {
        subscriptions: new Map([['sub_a', sub()]]),
        deliveries: new Map([
          ['done', { subscriptionId: 'sub_a', status: 'succeeded', attemptCount: 1 }],
          ['again', pending('sub_a', 2)],
        ]),
      },
      schedule([]),
      PAUSE,
    );
    expect(b.outcomes.map((o) => o.applied)).toEqual([false, false, false]);
    expect(b.attempts.map((a) => a.claimed.id)).toEqual(['done', 'again']);
    expect(b.deliveries).toEqual([]);
    expect(b.subscriptions).toEqual([]);
  });

  it('connection failures at the threshold pause the subscription', () => {
    const b = bookkeep(
      [
        { claimed: claimed('d1', 'sub_a'), result: result(T0, { responseStatus: null, connectionFailure: true }) },
        { claimed: claimed('d2', 'sub_a'), result: result(T0 + 1_000, { responseStatus: null, connectionFailure: true }) },
      ],
      {
        subscriptions: new Map([['sub_a', sub()]]),
        deliveries: new Map([
          ['d1', pending('sub_a')],
          ['d2', pending('sub_a')],
        ]),
      },
      schedule([]),
      PAUSE,
    );
    const pause = { until: T0 + 1_100 + 30_000, reason: 'unreachable' };
    expect(b.outcomes.map((o) => o.paused)).toEqual([null, pause]);
    expect([...b.pauses]).toEqual([['d2', pause]]);
    expect(b.subscriptions[0]?.pause).toEqual({ connectionFailures: 2, pausedUntil: T0 + 31_100, pauseReason: 'unreachable' });
  });

  it('a deactivating failure cancels the pending deliveries of the subscription for the rest of the batch', () => {
    const b = bookkeep(
      [
        { claimed: claimed('d1', 'sub_a', 3), result: result(T0) },
        { claimed: claimed('d2', 'sub_a'), result: result(T0 + 10) },
        { claimed: claimed('d3', 'sub_b'), result: result(T0 + 20) },
      ],
      {
        subscriptions: new Map([
          ['sub_a', sub()],
          ['sub_b', sub()],
        ]),
        deliveries: new Map([
          ['d1', pending('sub_a', 3)],
          ['d2', pending('sub_a')],
          ['d3', pending('sub_b')],
        ]),
      },
      schedule([]),
      PAUSE,
    );
    expect(b.outcomes.map((o) => [o.applied, o.deactivated])).toEqual([
      [true, true],
      [false, false],
      [true, false],
    ]);
    expect(b.deactivations).toEqual([{ subscriptionId: 'sub_a', at: T0 + 100, outcome: b.outcomes[0] }]);
    expect(b.deliveries.map((d) => [d.id, d.status])).toEqual([
      ['d1', 'failed'],
      ['d3', 'pending'],
    ]);
  });

  it('leaves its inputs as they were', () => {
    const subscriptions = new Map([['sub_a', sub()]]);
    const deliveries = new Map([['d1', pending('sub_a')]]);
    bookkeep([{ claimed: claimed('d1', 'sub_a'), result: result(T0) }], { subscriptions, deliveries }, schedule([]), PAUSE);
    expect(subscriptions.get('sub_a')).toEqual(sub());
    expect(deliveries.get('d1')).toEqual(pending('sub_a'));
  });
});
