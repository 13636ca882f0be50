import { describe, expect, it } from 'vitest';
import { decide, decidePeek, meterWindow, unauthenticated, unavailable } from './meter-decision';
import type { KeyPrincipal } from './tiers';

const principal: KeyPrincipal = {
  keyId: 'key_1',
  accountId: 'acc_1',
  tier: 'free',
  tierRank: 0,
  dailyLimit: 100,
  hardLimit: true,
  overageRateUsd: '0',
  revoked: false,
};
const NOW = Date.parse('2026-11-27T23:59:58.500Z');
const W = meterWindow(NOW);

describe('meterWindow', () => {
  it('counts in the UTC day and resets at the next UTC midnight', () => {
    expect(W).toEqual({ day: '2026-11-27', resetsAt: '2026-11-28T00:00:00.000Z', secondsToReset: 2 });
  });

  it('waits at least one second', () => {
    expect(meterWindow(Date.parse('2026-11-27T23:59:59.999Z')).secondsToReset).toBe(1);
    expect(meterWindow(Date.parse('2026-11-27T00:00:00.000Z')).secondsToReset).toBe(86_400);
  });
});

describe('decide', () => {
  it('allows a counted request with what remains of the limit', () => {
    expect(decide(principal, { kind: 'counted', count: 40 }, W)).toEqual({
      decision: 'allowed',
      principal,
      count: 40,
      remaining: 60,
      resetsAt: '2026-11-28T00:00:00.000Z',
      retryAfterSeconds: 0,
    });
  });

  it('allows a peek, and never shows a negative remainder over the limit', () => {
    expect(decide(principal, { kind: 'peeked', count: 130 }, W)).toMatchObject({ decision: 'allowed', count: 130, remaining: 0 });
  });

  it('refuses at the limit until the reset', () => {
    expect(decide(principal, { kind: 'refused', count: 100 }, W)).toEqual({
      decision: 'rate_limited',
      principal,
      count: 100,
      remaining: 0,
      resetsAt: '2026-11-28T00:00:00.000Z',
      retryAfterSeconds: 2,
    });
  });

  it('answers unavailable (retry in a second) when the counter did not answer', () => {
    expect(decide(principal, 'unavailable', W)).toEqual({
      decision: 'unavailable',
      principal,
      count: 0,
      remaining: 0,
      resetsAt: '2026-11-28T00:00:00.000Z',
      retryAfterSeconds: 1,
    });
    expect(unavailable(W)).toEqual({ decision: 'unavailable', count: 0, remaining: 0, resetsAt: W.resetsAt, retryAfterSeconds: 1 });
  });

  it('an unknown key is unauthenticated, with no retry hint', () => {
    expect(unauthenticated(W)).toEqual({ decision: 'unauthenticated', count: 0, remaining: 0, resetsAt: W.resetsAt, retryAfterSeconds: 0 });
  });
});

describe('decidePeek (fail-open)', () => {
  it('refuses at a hard limit reached, otherwise peeks', () => {
    expect(decidePeek(100, 100, true)).toEqual({ kind: 'refused', count: 100 });
    expect(decidePeek(99, 100, true)).toEqual({ kind: 'peeked', count: 99 });
    expect(decidePeek(500, 100, false)).toEqual({ kind: 'peeked', count: 500 });
  });
});
