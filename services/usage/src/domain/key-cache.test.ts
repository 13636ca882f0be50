import { ManualClock } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { KeyCache } from './key-cache';
import type { KeyPrincipal } from './tiers';

const principal = (accountId: string): KeyPrincipal => ({
  keyId: `key_${accountId}`,
  accountId,
  tier: 'free',
  tierRank: 0,
  dailyLimit: 100,
  hardLimit: true,
  overageRateUsd: '0.000',
  revoked: false,
});

describe('KeyCache', () => {
  it('serves an entry for at most its TTL (bounded staleness after revocation)', () => {
    const clock = new ManualClock(0);
    const cache = new KeyCache(clock, 5000, 1000);
    cache.set('d1', principal('a1'));
    clock.advance(4999);
    expect(cache.get('d1')?.accountId).toBe('a1');
    clock.advance(1);
    expect(cache.get('d1')).toBeUndefined();
  });

  it('keeps unknown keys (null) for the shorter negative TTL', () => {
    const clock = new ManualClock(0);
    const cache = new KeyCache(clock, 5000, 1000);
    cache.set('unknown', null);
    clock.advance(999);
    expect(cache.get('unknown')).toBeNull();
    clock.advance(1);
    expect(cache.get('unknown')).toBeUndefined();
  });

  it('evicts every key of an account at once', () => {
    const cache = new KeyCache(new ManualClock(0), 5000, 1000);
    cache.set('d1', principal('a1'));
    cache.set('d2', principal('a1'));
    cache.set('d3', principal('a2'));
    cache.evictAccount('a1');
    expect([cache.get('d1'), cache.get('d2'), cache.get('d3')?.accountId]).toEqual([undefined, undefined, 'a2']);
  });

  it('is bounded in size, evicting the oldest entry', () => {
    const cache = new KeyCache(new ManualClock(0), 5000, 1000, 2);
    cache.set('d1', principal('a1'));
    cache.set('d2', principal('a2'));
    cache.set('d3', principal('a3'));
    expect(cache.get('d1')).toBeUndefined();
    expect(cache.get('d3')?.accountId).toBe('a3');
  });

  describe('while the key store is unreachable', () => {
    it('still gives a known key its last principal for outageTtlMs past its TTL, then nothing', () => {
      const clock = new ManualClock(0);
      const cache = new KeyCache(clock, 5000, 1000, 100, 60_000);
      cache.set('d1', principal('a1'));
      clock.advance(5000);
      expect(cache.get('d1')).toBeUndefined(); // normal lookups ask the key store again
      expect(cache.getDuringOutage('d1')?.accountId).toBe('a1');
      clock.advance(59_999);
      expect(cache.getDuringOutage('d1')?.accountId).toBe('a1');
      clock.advance(1);
      expect(cache.getDuringOutage('d1')).toBeUndefined();
    });

    it('never vouches for an unknown key, nor for one the cache never saw', () => {
      const clock = new ManualClock(0);
      const cache = new KeyCache(clock, 5000, 1000, 100, 60_000);
      cache.set('unknown', null);
      expect(cache.getDuringOutage('unknown')).toBeUndefined();
      expect(cache.getDuringOutage('never-seen')).toBeUndefined();
    });

    it('forgets an evicted account at once (a local revocation is not undone by an outage)', () => {
      const clock = new ManualClock(0);
      const cache = new KeyCache(clock, 5000, 1000, 100, 60_000);
      cache.set('d1', principal('a1'));
      cache.evictAccount('a1');
      expect(cache.getDuringOutage('d1')).toBeUndefined();
    });

    it('with no outage TTL (the default) keeps nothing past the TTL', () => {
      const clock = new ManualClock(0);
      const cache = new KeyCache(clock, 5000, 1000);
      cache.set('d1', principal('a1'));
      clock.advance(5000);
      expect(cache.getDuringOutage('d1')).toBeUndefined();
    });
  });
});
