import { type PauseOptions, type PauseReason, type PauseState, pauseAfterAttempt } from '../limits';
import type { AttemptDecision, AttemptRecord, DecisionInput, RecordOutcome } from './types';

/**
 * What a batch of attempt outcomes means, computed without I/O: for each
 * attempt the decision (from the injected schedule), the delivery's next
 * state and time, the subscription's failure counters and pause, and whether
 * the subscription is deactivated. Items are applied in order, each on the
 * state the previous ones left, so a batch gives what recording them one by
 * one would. The dispatch queue reads the locked rows, calls this, and
 * writes what it returns.
 */

/** A subscription as locked before the batch. */
export interface SubscriptionBefore {
  /** Its last success (any delivery); null if none. */
  lastSuccessAt: number | null;
  isActive: boolean;
  pause: PauseState;
}

/** A delivery as locked before the batch. */
export interface DeliveryBefore {
  subscriptionId: string;
  status: string;
  attemptCount: number;
}

/** A delivery's new state. */
export interface DeliveryUpdate {
  id: string;
  status: AttemptDecision['status'];
  /** The next attempt (pending only); null otherwise. */
  nextAttemptAt: number | null;
  /** When the attempt finished (the row's updated_at). */
  at: number;
}

/** A subscription's bookkeeping after the batch (only the ones an applied attempt touched). */
export interface SubscriptionUpdate {
  id: string;
  /** A success came: consecutive_failures is set to `failures`; otherwise `failures` is added to it. */
  reset: boolean;
  /** Failures since the last success of the batch (or in the batch, without one). */
  failures: number;
  /** The latest start of a successful attempt; null: none in the batch. */
  successAt: number | null;
  /** The end of the last failed attempt; null: none in the batch. */
  failureAt: number | null;
  pause: PauseState;
}

export interface Deactivation {
  subscriptionId: string;
  at: number;
  /** The outcome of the attempt that deactivated it (its `cancelled` is filled in by the writer). */
  outcome: RecordOutcome;
}

export interface Bookkeeping {
  /** One per item, in order. */
  outcomes: RecordOutcome[];
  /** The attempts to record (the items whose delivery still exists). */
  attempts: AttemptRecord[];
  deliveries: DeliveryUpdate[];
  subscriptions: SubscriptionUpdate[];
  /** The pause each attempt started, by delivery id (recorded with its attempt row). */
  pauses: Map<string, { until: number; reason: PauseReason }>;
  deactivations: Deactivation[];
}

interface SubscriptionWork extends SubscriptionBefore {
  touched: boolean;
  reset: boolean;
  failures: number;
  successAt: number | null;
  failureAt: number | null;
}

function decisionInput(item: AttemptRecord, lastSuccessAt: number | null): DecisionInput {
  const { claimed, result } = item;
  return {
    attempt: claimed.attempt,
    success: result.success,
    manual: claimed.manual,
    finishedAt: result.finishedAt,
    firstAttemptAt: claimed.firstAttemptAt,
    lastSuccessAt,
    retryAfterMs: result.retryAfterMs ?? null,
    permanent: result.permanent ?? false,
  };
}

/** The subscription's counters and pause after one applied attempt; returns the pause it started. */
function countAttempt(sub: SubscriptionWork, item: AttemptRecord, pauseOptions: PauseOptions) {
  const { result } = item;
  sub.touched = true;
  if (result.success) {
    sub.reset = true;
    sub.failures = 0;
    sub.lastSuccessAt = Math.max(sub.lastSuccessAt ?? result.startedAt, result.startedAt);
    sub.successAt = Math.max(sub.successAt ?? result.startedAt, result.startedAt);
  } else {
    sub.failures += 1;
    sub.failureAt = result.finishedAt;
  }
  const backoff = pauseAfterAttempt(
    sub.pause,
    {
      finishedAt: result.finishedAt,
      success: result.success,
      responseStatus: result.responseStatus,
      retryAfterMs: result.retryAfterMs ?? null,
      connectionFailure: result.connectionFailure ?? false,
    },
    pauseOptions,
  );
  sub.pause = backoff.state;
  return backoff.pause;
}

/**
 * The bookkeeping of a batch of attempts (see the module comment). An item
 * whose delivery is gone, no longer pending, or claimed again since (another
 * attempt number) is not applied: only its attempt row is written.
 */
export function bookkeep(
  items: readonly AttemptRecord[],
  before: { subscriptions: ReadonlyMap<string, SubscriptionBefore>; deliveries: ReadonlyMap<string, DeliveryBefore> },
  decide: (input: DecisionInput) => AttemptDecision,
  pauseOptions: PauseOptions,
): Bookkeeping {
  const subs = new Map<string, SubscriptionWork>(
    [...before.subscriptions].map(([id, s]) => [id, { ...s, touched: false, reset: false, failures: 0, successAt: null, failureAt: null }]),
  );
  const deliveries = new Map([...before.deliveries].map(([id, d]) => [id, { ...d }]));
  const out: Bookkeeping = {
    outcomes: [],
    attempts: items.filter((i) => deliveries.has(i.claimed.id)),
    deliveries: [],
    subscriptions: [],
    pauses: new Map(),
    deactivations: [],
  };
  for (const item of items) {
    const { claimed, result } = item;
    const sub = subs.get(claimed.subscriptionId);
    const row = deliveries.get(claimed.id);
    const decision = decide(decisionInput(item, sub?.lastSuccessAt ?? null));
    if (!sub || !row || row.status !== 'pending' || row.attemptCount !== claimed.attempt) {
      out.outcomes.push({ decision, applied: false, deactivated: false, cancelled: 0 });
      continue;
    }
    row.status = decision.status;
    out.deliveries.push({
      id: claimed.id,
      status: decision.status,
      nextAttemptAt: decision.status === 'pending' ? decision.nextAttemptAt : null,
      at: result.finishedAt,
    });
    const paused = countAttempt(sub, item, pauseOptions);
    if (paused) out.pauses.set(claimed.id, paused);
    const outcome: RecordOutcome = { decision, applied: true, deactivated: false, cancelled: 0, paused };
    out.outcomes.push(outcome);
    if (decision.status === 'failed' && decision.deactivate && sub.isActive) {
      sub.isActive = false;
      outcome.deactivated = true;
      out.deactivations.push({ subscriptionId: claimed.subscriptionId, at: result.finishedAt, outcome });
      // Its pending deliveries are cancelled: later items of this batch find them so.
      for (const d of deliveries.values()) {
        if (d.subscriptionId === claimed.subscriptionId && d.status === 'pending') d.status = 'cancelled';
      }
    }
  }
  for (const [id, s] of subs) {
    if (!s.touched) continue;
    out.subscriptions.push({ id, reset: s.reset, failures: s.failures, successAt: s.successAt, failureAt: s.failureAt, pause: s.pause });
  }
  return out;
}

/**
 * The outcomes of a batch of successes recorded without reading anything first (`recordSuccesses`):
 * what `bookkeep` gives each, `applied` being the deliveries still pending on that attempt. A success
 * starts no pause and deactivates nothing, and its decision does not depend on the subscription.
 */
export function successOutcomes(
  items: readonly AttemptRecord[],
  applied: ReadonlySet<string>,
  decide: (input: DecisionInput) => AttemptDecision,
): RecordOutcome[] {
  return items.map((item) => {
    const decision = decide(decisionInput(item, null));
    return applied.has(item.claimed.id)
      ? { decision, applied: true, deactivated: false, cancelled: 0, paused: null }
      : { decision, applied: false, deactivated: false, cancelled: 0 };
  });
}
