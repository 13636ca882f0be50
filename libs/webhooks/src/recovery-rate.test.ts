import { describe, expect, it } from 'vitest';
import { RECOVER_RATE, recoverRateDecision } from './recovery-rate-rule';

describe('recover rate (GCRA, 10 a minute per account)', () => {
  const now = Date.parse('2026-11-25T12:00:00.000Z');

  it('allows a burst of 10, then one every 6 s', () => {
    let tat: number | null = null;
    const take = (at: number) => {
      const d = recoverRateDecision(tat, at);
      if (d.allowed) tat = Math.max(tat ?? at, at) + RECOVER_RATE.windowMs / RECOVER_RATE.limit;
      return d;
    };
    for (let i = 0; i < 10; i++) expect(take(now), `call ${i + 1}`).toEqual({ allowed: true });
    expect(take(now)).toEqual({ allowed: false, retryAfterSeconds: 6 });
    expect(take(now + 5_999)).toEqual({ allowed: false, retryAfterSeconds: 1 });
    expect(take(now + 6_000)).toEqual({ allowed: true });
    expect(take(now + 6_000)).toEqual({ allowed: false, retryAfterSeconds: 6 });
    // A minute of silence gives the whole burst back.
    for (let i = 0; i < 10; i++) expect(take(now + 66_000)).toEqual({ allowed: true });
  });

  it('never answers a Retry-After under 1 s', () => {
    expect(recoverRateDecision(now + 60_000 - 6_000 + 1, now)).toEqual({ allowed: false, retryAfterSeconds: 1 });
    expect(recoverRateDecision(null, now)).toEqual({ allowed: true });
  });
});
