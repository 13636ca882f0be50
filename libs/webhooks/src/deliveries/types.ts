import type { EventFacets } from '../filter';
import type { PauseReason } from '../limits';

/**
 * The types the dispatch queue, the bookkeeping and the delivery log share
 * (schema `webhook`). Times are epoch ms from the caller's injected clock.
 */

export const DEACTIVATION_CONSECUTIVE_FAILURES = 'consecutive_failures';
export const TEST_EVENT_TYPE = 'webhook.test';

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'cancelled';

/** An event as the fan-out needs it. */
export interface FanOutEvent {
  id: string;
  type: string;
  /** The envelope exactly as published (signed and sent byte for byte). */
  body: string;
  /** The facilities the event concerns (lower-case UUIDs). */
  facilityIds: readonly string[];
  /** What subscription filters test (`eventFacets` of the envelope); computed from `body` when absent. */
  facets?: EventFacets;
  /** Trace context to store with the deliveries (service-kit's traceContextColumn), if traced. */
  traceContext?: string | null;
}

/** A delivery claimed for one attempt (leased until `leaseUntil`). */
export interface ClaimedDelivery {
  id: string;
  subscriptionId: string;
  /** The subscription's owner (the dispatcher checks the account is still entitled to webhooks). */
  accountId: string;
  eventId: string;
  eventType: string;
  body: string;
  /** The number of this attempt (1 = first). */
  attempt: number;
  manual: boolean;
  firstAttemptAt: number;
  createdAt: number;
  url: string;
  /** The clear signing secret, decrypted at claim time. */
  secret: string;
  /** Every secret that signs this attempt, newest first: `secret`, then the previous one during a rotation overlap. */
  secrets: string[];
  /** The trace context stored by the fan-out, or null. */
  traceContext: string | null;
  /**
   * Under a rate limit (the subscription's or the default), the latest time (the caller's clock)
   * this attempt may start (`startDeadline`): a later start could crowd the receiver's
   * one-second window, so it is given back unsent (`startsTooLate`). Null: no rate limit.
   */
  startBy: number | null;
  /** What `releaseClaims` needs to undo this claim exactly. */
  claim: ClaimRef;
}

/** A claim as it was taken: its attempt number and the attempt times it replaced. */
export interface ClaimRef {
  id: string;
  attempt: number;
  previousFirstAttemptAt: Date | null;
  previousLastAttemptAt: Date | null;
}

export interface AttemptResult {
  startedAt: number;
  finishedAt: number;
  durationMs: number;
  responseStatus: number | null;
  error: string | null;
  success: boolean;
  /** A 429 or 503's Retry-After, in ms from the end of the attempt; null when absent. */
  retryAfterMs?: number | null;
  /** The destination is refused for good (the URL or its resolved address fails the safety rules). */
  permanent?: boolean;
  /** No HTTP response: a timeout, a connection, TLS or DNS failure (counts towards pausing the subscription). */
  connectionFailure?: boolean;
  /** What the delivery log shows to debug the receiver (absent: not recorded). */
  debug?: AttemptDebug;
}

/** An attempt's request and response as the delivery log keeps them (bounded by the sender). */
export interface AttemptDebug {
  requestHeaders: Record<string, string>;
  responseHeaders: Record<string, string> | null;
  responseHeadersTruncated: boolean;
  responseBody: string | null;
  responseBodyTruncated: boolean;
  timings: {
    dnsMs: number | null;
    connectMs: number | null;
    tlsMs: number | null;
    firstByteMs: number | null;
    connectionReused: boolean | null;
  };
}

/** What happens to a delivery after an attempt (decided by the dispatcher's pure schedule). */
export type AttemptDecision =
  | { status: 'succeeded' }
  | { status: 'pending'; nextAttemptAt: number }
  | { status: 'failed'; deactivate: boolean };

export interface DecisionInput {
  attempt: number;
  success: boolean;
  manual: boolean;
  finishedAt: number;
  firstAttemptAt: number;
  /** The subscription's last success (any delivery), before this attempt; null if none. */
  lastSuccessAt: number | null;
  /** The receiver's Retry-After (429/503), in ms; null when absent. */
  retryAfterMs?: number | null;
  /** The destination is refused for good: no retry. */
  permanent?: boolean;
}

/** One attempt to record (`recordAttempts`). */
export interface AttemptRecord {
  claimed: ClaimedDelivery;
  result: AttemptResult;
}

export interface RecordOutcome {
  decision: AttemptDecision;
  /** The pause of the subscription this attempt started, if any. */
  paused?: { until: number; reason: PauseReason } | null;
  /** False when the delivery was taken over meanwhile (lease expired) or is gone: nothing but the attempt row was written. */
  applied: boolean;
  deactivated: boolean;
  cancelled: number;
}
