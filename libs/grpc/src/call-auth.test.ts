import { describe, expect, it } from 'vitest';
import { CALL_AUTH_MAX_SKEW_MS, callVerifier, signCall } from './call-auth';

const SECRET = 'call-auth-unit-test-secret-0123456789abcd';
const PATH = '/usage.v1.UsageService/AuthorizeStream';
const T0 = 1_800_000_000_000;

describe('per-call tokens', () => {
  it('verifies a token for the method it was made for, within the skew either side', () => {
    let now = T0;
    const verify = callVerifier(SECRET, () => now);
    const token = signCall(SECRET, PATH, () => T0);
    expect(token).toMatch(/^v1\.1800000000000\.[A-Za-z0-9_-]{43}$/);
    expect(verify(token, PATH)).toBe(true);
    now = T0 + CALL_AUTH_MAX_SKEW_MS;
    expect(verify(token, PATH)).toBe(true);
    now = T0 + CALL_AUTH_MAX_SKEW_MS + 1;
    expect(verify(token, PATH)).toBe(false);
    now = T0 - CALL_AUTH_MAX_SKEW_MS - 1;
    expect(verify(token, PATH)).toBe(false);
  });

  it('refuses another method, another secret, a changed timestamp and malformed values', () => {
    const verify = callVerifier(SECRET, () => T0);
    const token = signCall(SECRET, PATH, () => T0);
    expect(verify(token, '/usage.v1.UsageService/GetUsage')).toBe(false);
    expect(
      verify(
        signCall(`${SECRET}x`, PATH, () => T0),
        PATH,
      ),
    ).toBe(false);
    expect(verify(token.replace('.1800000000000.', '.1800000000001.'), PATH)).toBe(false);
    for (const bad of [undefined, '', 'v1', 'v1..', `v2${token.slice(2)}`, `${token}A`, Buffer.from(token), 42, 'x'.repeat(10_000)]) {
      expect(verify(bad, PATH)).toBe(false);
    }
  });

  it('refuses a secret shorter than 32 characters', () => {
    expect(() => callVerifier('short')).toThrow(/at least 32 characters/);
    expect(() => signCall('short', PATH)).toThrow(/at least 32 characters/);
  });
});
