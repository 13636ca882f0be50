import { describe, expect, it } from 'vitest';
import { digestApiKey, generateApiKey, isWellFormedKey, lastFour } from './api-key';

describe('API keys', () => {
  it('have the fcd_ prefix and 32 base62 characters', () => {
    for (let i = 0; i < 200; i++) {
      const key = generateApiKey();
      expect(key).toMatch(/^fcd_[A-Za-z0-9]{32}$/);
      expect(isWellFormedKey(key)).toBe(true);
    }
  });

  it('uses only bytes below 248 so every character is equally likely', () => {
    // A source that yields 255 (rejected) then 0..61: the key must be exactly the alphabet's first 32 characters.
    let calls = 0;
    const source = (n: number) => {
      const first = calls++ === 0;
      return Buffer.from(Array.from({ length: n }, (_, i) => (first && i < 16 ? 255 : i % 62)));
    };
    const key = generateApiKey(source);
    expect(key).toBe(`fcd_${'QRSTUVWXYZabcdefghijklmnopqrstuv'}`);
  });

  it('rejects malformed keys', () => {
    for (const bad of ['', 'fcd_', `fcd_${'a'.repeat(31)}`, `fcd_${'a'.repeat(33)}`, `abc_${'a'.repeat(32)}`, `fcd_${'a'.repeat(31)}!`]) {
      expect(isWellFormedKey(bad)).toBe(false);
    }
  });

  it('stores a SHA-256 digest and the last four characters', () => {
    const key = `fcd_${'A'.repeat(28)}wxyz`;
    expect(digestApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(digestApiKey(key)).not.toContain('AAAA');
    expect(lastFour(key)).toBe('wxyz');
  });

  it('digests the key as the stored digests were made: SHA-256 of its UTF-8 bytes, hex', () => {
    expect(digestApiKey('fcd_AAAAbbbbCCCCdddd0123456789abcdef')).toBe('e5117418e4e028ff7170eccb3e4014978a58e7257c855f666b90677096ec710d');
  });
});
