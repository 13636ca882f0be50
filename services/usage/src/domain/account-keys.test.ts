import { AppError, KeyId } from '@fcd/service-kit/pure';
import { describe, expect, it } from 'vitest';
import { isLive, keyPrefix, parseExpiresAt, parseKeyName, parseRollSeconds } from './account-keys';

const NOW = Date.parse('2026-11-22T08:00:00.000Z');

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError && err.code === 'VALIDATION_ERROR')
      return (err.details as { fields: Array<{ field: string }> }).fields[0]?.field;
    throw err;
  }
  return undefined;
}

describe('account key rules', () => {
  it('KeyId accepts key_<uuid> in lower case only', () => {
    expect(KeyId.is('key_7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f')).toBe(true);
    expect(KeyId.parse('key_7D3F3C1E-9A4B-4C2D-8E1F-0A1B2C3D4E5F')).toBeUndefined();
    expect(KeyId.parse('wh_7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f')).toBeUndefined();
  });

  it('keeps the first 8 characters as the prefix', () => {
    expect(keyPrefix('fcd_AbCdEfGhIjKlMnOpQrStUvWxYz012345')).toBe('fcd_AbCd');
  });

  it('validates names, expiries and roll windows naming the field', () => {
    expect(parseKeyName('ci')).toBe('ci');
    for (const bad of [undefined, 3, '', '   ', 'x'.repeat(101), 'a\nb']) expect(fieldOf(() => parseKeyName(bad))).toBe('name');
    expect(parseExpiresAt(undefined, NOW)).toBeNull();
    expect(parseExpiresAt('2026-11-23T00:00:00+02:00', NOW)).toBe('2026-11-22T22:00:00.000Z');
    for (const bad of ['tomorrow', '2026-11-22', '2026-11-22T08:00:00.000Z', 5])
      expect(fieldOf(() => parseExpiresAt(bad, NOW))).toBe('expires_at');
    expect(parseRollSeconds(0)).toBe(0);
    expect(parseRollSeconds(604_800)).toBe(604_800);
    for (const bad of [-1, 604_801, 1.5, '60', undefined]) expect(fieldOf(() => parseRollSeconds(bad))).toBe('expires_in_seconds');
  });

  it('a key is live until revoked or past its expiry', () => {
    expect(isLive({ revokedAt: null, expiresAt: null }, NOW)).toBe(true);
    expect(isLive({ revokedAt: null, expiresAt: new Date(NOW + 1).toISOString() }, NOW)).toBe(true);
    expect(isLive({ revokedAt: null, expiresAt: new Date(NOW).toISOString() }, NOW)).toBe(false);
    expect(isLive({ revokedAt: new Date(NOW).toISOString(), expiresAt: null }, NOW)).toBe(false);
  });
});
