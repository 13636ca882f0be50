import { describe, expect, it } from 'vitest';
import { type SecretDecrypter, withSecretCache } from './secret-cache';

function counting(fail = new Set<string>()): SecretDecrypter & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    decrypt(ciphertext, subscriptionId) {
      calls.push(`${subscriptionId}:${ciphertext}`);
      if (fail.has(ciphertext)) throw new Error('bad ciphertext');
      return `clear(${ciphertext})`;
    },
  };
}

describe('withSecretCache', () => {
  it('decrypts once per (subscription, ciphertext) within the ttl', () => {
    let now = 1_000;
    const inner = counting();
    const cached = withSecretCache(inner, { ttlMs: 100, clock: () => now });
    expect(cached.decrypt('c1', 'sub_a')).toBe('clear(c1)');
    now = 1_099;
    expect(cached.decrypt('c1', 'sub_a')).toBe('clear(c1)');
    expect(inner.calls).toEqual(['sub_a:c1']);
  });

  it('decrypts again once the ttl has passed', () => {
    let now = 1_000;
    const inner = counting();
    const cached = withSecretCache(inner, { ttlMs: 100, clock: () => now });
    cached.decrypt('c1', 'sub_a');
    now = 1_100;
    cached.decrypt('c1', 'sub_a');
    expect(inner.calls).toEqual(['sub_a:c1', 'sub_a:c1']);
  });

  it('keys on the ciphertext: a rotated secret is decrypted at once', () => {
    const inner = counting();
    const cached = withSecretCache(inner, { ttlMs: 100, clock: () => 0 });
    expect(cached.decrypt('c1', 'sub_a')).toBe('clear(c1)');
    expect(cached.decrypt('c2', 'sub_a')).toBe('clear(c2)');
    expect(cached.decrypt('c1', 'sub_b')).toBe('clear(c1)');
    expect(inner.calls).toEqual(['sub_a:c1', 'sub_a:c2', 'sub_b:c1']);
  });

  it('caches nothing when decrypting fails', () => {
    const inner = counting(new Set(['bad']));
    const cached = withSecretCache(inner, { clock: () => 0 });
    expect(() => cached.decrypt('bad', 'sub_a')).toThrow('bad ciphertext');
    expect(() => cached.decrypt('bad', 'sub_a')).toThrow('bad ciphertext');
    expect(inner.calls).toEqual(['sub_a:bad', 'sub_a:bad']);
  });

  it('starts over when full', () => {
    const inner = counting();
    const cached = withSecretCache(inner, { max: 2, clock: () => 0 });
    cached.decrypt('c1', 's');
    cached.decrypt('c2', 's');
    cached.decrypt('c3', 's'); // full: cleared, then c3 kept
    cached.decrypt('c3', 's');
    cached.decrypt('c1', 's');
    expect(inner.calls).toEqual(['s:c1', 's:c2', 's:c3', 's:c1']);
  });
});
