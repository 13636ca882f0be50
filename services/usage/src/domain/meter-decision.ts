import { isoTimestamp, nextUtcMidnight, utcDay } from '@fcd/service-kit/pure';
import type { BillingFigures } from './billing';
import type { KeyPrincipal } from './tiers';

/**
 * The meter's decisions, without I/O: what a key lookup and a counter outcome
 * mean for one request (allowed, refused, unauthenticated, unavailable), with
 * the count, what remains of the daily limit, when it resets and how long a
 * refused caller waits (the gateway's X-RateLimit-* and Retry-After).
 */

export type Decision = 'allowed' | 'unauthenticated' | 'rate_limited' | 'unavailable';

export interface UsageReport {
  tier: string;
  dailyLimit: number;
  today: { requestCount: number; remaining: number; resetsAt: string };
  billing: BillingFigures;
  /** Earlier days came from this replica's cache while Postgres was unreachable (today is live). */
  stale: boolean;
}

export interface MeterResult {
  decision: Decision;
  principal?: KeyPrincipal;
  count: number;
  remaining: number;
  resetsAt: string;
  retryAfterSeconds: number;
  /** For allowed requests that asked for it: the usage report, this request included. */
  usage?: UsageReport;
}

/** A counter's answer for one request: counted, allowed without counting (a peek), or refused at a hard limit. */
export type SettledCount = { kind: 'counted' | 'peeked' | 'refused'; count: number };

/** The UTC day a request is counted in and when its counter resets. */
export interface MeterWindow {
  day: string;
  resetsAt: string;
  /** Seconds until the reset, at least 1 (a refused request's Retry-After). */
  secondsToReset: number;
}

export function meterWindow(now: number): MeterWindow {
  const resetsMs = nextUtcMidnight(now);
  return { day: utcDay(now), resetsAt: isoTimestamp(resetsMs), secondsToReset: Math.max(1, Math.ceil((resetsMs - now) / 1000)) };
}

/** A key that is malformed, unknown or revoked. */
export function unauthenticated(w: MeterWindow): MeterResult {
  return { decision: 'unauthenticated', count: 0, remaining: 0, resetsAt: w.resetsAt, retryAfterSeconds: 0 };
}

/** A store needed for the decision did not answer (in time): retry in a second. */
export function unavailable(w: MeterWindow, principal?: KeyPrincipal): MeterResult {
  const r: MeterResult = { decision: 'unavailable', count: 0, remaining: 0, resetsAt: w.resetsAt, retryAfterSeconds: 1 };
  return principal ? { ...r, principal } : r;
}

/** What a counter's answer means for a request of `principal`. */
export function decide(principal: KeyPrincipal, outcome: SettledCount | 'unavailable', w: MeterWindow): MeterResult {
  if (outcome === 'unavailable') return unavailable(w, principal);
  if (outcome.kind === 'refused') {
    return {
      decision: 'rate_limited',
      principal,
      count: outcome.count,
      remaining: 0,
      resetsAt: w.resetsAt,
      retryAfterSeconds: w.secondsToReset,
    };
  }
  const remaining = Math.max(0, principal.dailyLimit - outcome.count);
  return { decision: 'allowed', principal, count: outcome.count, remaining, resetsAt: w.resetsAt, retryAfterSeconds: 0 };
}

/** A peek counted in Postgres (fail-open): refused at a hard limit reached, else allowed without counting. */
export function decidePeek(count: number, limit: number, hard: boolean): SettledCount {
  return hard && count >= limit ? { kind: 'refused', count } : { kind: 'peeked', count };
}
