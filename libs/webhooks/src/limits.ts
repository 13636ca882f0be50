/**
 * Per-subscription delivery limits (docs/adr/0014-per-subscription-delivery-limits.md): the
 * pacing rule the claim applies to a subscription's `rate_limit_per_second`. Pure: every time is
 * epoch ms from the caller (the claim passes the database clock, shared by every replica).
 */

/** `max_in_flight` when a create does not give one; the range the API accepts. */
export const DEFAULT_MAX_IN_FLIGHT = 16;
export const MAX_IN_FLIGHT_RANGE = { min: 1, max: 64 } as const;
export const RATE_LIMIT_RANGE = { min: 1, max: 1000 } as const;

/**
 * Starts are spaced 10 % wider than 1/rate: what the receiver measures is the arrival time, which
 * differs from the start by a latency that varies (a new TLS connection costs tens of ms, a reused
 * one none; two replicas each open their own). The margin lets arrivals drift by up to 100 ms
 * (50 ms with a burst) without a one-second window at the receiver ever holding more than `rate`.
 */
export const RATE_SPACING_FACTOR = 1.1;
/**
 * From 50/s a subscription may start a small burst at once (rate/25), so one claim takes several;
 * it costs half of the margin.
 */
const BURST_DIVISOR = 25;

export function rateIntervalMs(rate: number): number {
  return (1000 * RATE_SPACING_FACTOR) / rate;
}

export function rateBurst(rate: number): number {
  return Math.max(1, Math.floor(rate / BURST_DIVISOR));
}

export interface RateAllowance {
  /** How many attempts may start now. */
  allowed: number;
  /** The pacing clock to advance: after k starts the subscription's state becomes base + k × intervalMs. */
  base: number;
  intervalMs: number;
}

/**
 * GCRA (a token bucket kept as one timestamp, the "theoretical arrival time" `tat`): start k ≥ 1
 * attempts at `now` only if tat + (k − 1)·T ≤ now + τ, with T = rateIntervalMs(rate) and
 * τ = (burst − 1)·T. Over any window of W ms this admits at most floor((W + τ)/T) + 1 starts: for
 * W = 1000 ms that is floor(rate/1.1) + burst ≤ rate, for every rate from 1 to 1,000.
 */
export function rateAllowance(rate: number, tat: number | null, now: number): RateAllowance {
  const intervalMs = rateIntervalMs(rate);
  const tau = (rateBurst(rate) - 1) * intervalMs;
  const base = Math.max(tat ?? now, now);
  const allowed = base > now + tau ? 0 : Math.floor((now + tau - base) / intervalMs + 1e-9) + 1;
  return { allowed: Math.min(allowed, rateBurst(rate)), base, intervalMs };
}

/** When the next attempt may start after `taken` starts at `now` (the worker wakes then). */
export function nextStartAt(rate: number, allowance: RateAllowance, taken: number): number {
  return allowance.base + taken * allowance.intervalMs - (rateBurst(rate) - 1) * allowance.intervalMs;
}

/**
 * How long after its claim was issued a rate-limited attempt may still start: 50 ms, half of the
 * margin's 100 ms (25 ms, half of 50, with a burst). The claim admits starts at the database
 * clock's now; what the receiver sees is that time plus the delay to the start (the claim's
 * round trips, the local queueing before the send) plus the start→arrival latency. Only the
 * spread of those delays can crowd a one-second window, so half of the margin bounds the first
 * (measured, and enforced: a later start is given back unsent — checked before the send and again
 * once its connection is up, just before the request is written), the other half is left to the
 * second. Measured from just before the claim's statements were sent, it is an upper bound of the
 * time since the database read its clock.
 */
export const MAX_START_DELAY_MS = 50;

/** The start bound of a subscription at `rate`: MAX_START_DELAY_MS, halved from 50/s where the margin left by a burst is 50 ms. */
export function maxStartDelayMs(rate: number): number {
  return rateBurst(rate) === 1 ? MAX_START_DELAY_MS : MAX_START_DELAY_MS / 2;
}

/** The latest an attempt admitted under `rate` by a claim issued at `issuedAt` may start (the caller's clock). */
export function startDeadline(rate: number, issuedAt: number): number {
  return issuedAt + maxStartDelayMs(rate);
}

/**
 * Whether an attempt starting at `now` would start too late for its rate limit (then it must not
 * be sent: its claim is given back). `startBy` null: the subscription has no rate limit, no bound.
 */
export function startsTooLate(startBy: number | null, now: number): boolean {
  return startBy !== null && now > startBy;
}

/** The longest a receiver's Retry-After pauses its subscription: one hour. */
export const MAX_PAUSE_MS = 3_600_000;
/** Consecutive connection failures or timeouts after which a subscription is paused, then probed one delivery at a time. */
export const DEFAULT_BREAKER_THRESHOLD = 5;
/** How long such a subscription is paused after each failure (before the next probe). */
export const DEFAULT_BREAKER_COOLDOWN_MS = 30_000;

export type PauseReason = 'retry_after' | 'unreachable';

export interface PauseState {
  /** Connection failures and timeouts in a row (any HTTP response resets it). */
  connectionFailures: number;
  pausedUntil: number | null;
  pauseReason: PauseReason | null;
}

export interface PauseInput {
  finishedAt: number;
  success: boolean;
  responseStatus: number | null;
  /** A 429 or 503's Retry-After, in ms; null when absent. */
  retryAfterMs: number | null;
  /** No HTTP response: a timeout, a connection, TLS or DNS failure. */
  connectionFailure: boolean;
}

export interface PauseOptions {
  threshold: number;
  cooldownMs: number;
}

/**
 * The subscription's back-off after one attempt (pure; times from the caller). A 429 or 503 with
 * Retry-After pauses the whole subscription until then (at most MAX_PAUSE_MS); `threshold`
 * connection failures in a row pause it for `cooldownMs`, and every further one while it is
 * still failing pauses it again (the claim sends one delivery at a time meanwhile: half-open);
 * any HTTP response closes the circuit. `pause` is the pause this attempt started (null: none).
 */
export function pauseAfterAttempt(
  state: PauseState,
  input: PauseInput,
  o: PauseOptions,
): { state: PauseState; pause: { until: number; reason: PauseReason } | null } {
  let pause: { until: number; reason: PauseReason } | null = null;
  let connectionFailures = 0;
  if (input.connectionFailure) {
    connectionFailures = state.connectionFailures + 1;
    if (connectionFailures >= o.threshold) pause = { until: input.finishedAt + o.cooldownMs, reason: 'unreachable' };
  } else if (!input.success && (input.responseStatus === 429 || input.responseStatus === 503) && input.retryAfterMs !== null) {
    pause = { until: input.finishedAt + Math.min(Math.max(0, input.retryAfterMs), MAX_PAUSE_MS), reason: 'retry_after' };
  }
  const extends_ = pause !== null && (state.pausedUntil === null || pause.until > state.pausedUntil);
  return {
    state: {
      connectionFailures,
      pausedUntil: extends_ && pause ? pause.until : state.pausedUntil,
      pauseReason: extends_ && pause ? pause.reason : state.pauseReason,
    },
    pause,
  };
}
