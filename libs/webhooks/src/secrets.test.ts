import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeSecretKey,
  generateSecret,
  isWellFormedSecret,
  keyId,
  redactSecret,
  SecretBox,
  SecretKeyError,
  secretLast4,
} from './secrets';

describe('generateSecret', () => {
  it('is whsec_ followed by the standard base64 of 32 random bytes (Standard Webhooks verifiers take it)', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(isWellFormedSecret(secret)).toBe(true);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
  });

  it('still takes a secret made before (whsec_ + 43 base64url characters)', () => {
    expect(isWellFormedSecret(`whsec_${Buffer.alloc(32, 0xfb).toString('base64url')}`)).toBe(true);
  });

  it('draws from the injected random source (the CSPRNG by default) and never repeats', () => {
    expect(generateSecret((n) => Buffer.alloc(n, 0xff))).toBe(`whsec_${'/'.repeat(42)}8=`);
    const many = new Set(Array.from({ length: 1000 }, () => generateSecret()));
    expect(many.size).toBe(1000);
  });
});

describe('redactSecret', () => {
  it('shows whsec_, eight asterisks and the last four characters', () => {
    expect(redactSecret('whsec_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG')).toBe('whsec_********DEFG');
    expect(redactSecret(secretLast4('whsec_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG'))).toBe('whsec_********DEFG');
  });
});

describe('decodeSecretKey', () => {
  it('accepts 32 bytes in base64 or base64url, with or without padding', () => {
    const key = randomBytes(32);
    expect(decodeSecretKey(key.toString('base64'))).toEqual(key);
    expect(decodeSecretKey(key.toString('base64url'))).toEqual(key);
    expect(decodeSecretKey(key.toString('base64').replace(/=$/, ''))).toEqual(key);
  });

  it('refuses other lengths and non-base64 text', () => {
    for (const bad of [randomBytes(16).toString('base64'), randomBytes(33).toString('base64'), '', 'not a key', '!'.repeat(44)]) {
      expect(() => decodeSecretKey(bad)).toThrow(SecretKeyError);
    }
  });
});

describe('SecretBox', () => {
  const keyA = randomBytes(32);
  const keyB = randomBytes(32);
  const secret = generateSecret();
  const id = 'wh_7b0d7a56-8a4c-4d77-9a0e-2f1f7f1b2c3d';

  it('round-trips, with a fresh IV each time and the key id in the prefix', () => {
    const box = new SecretBox(keyA);
    const c1 = box.encrypt(secret, id);
    const c2 = box.encrypt(secret, id);
    expect(c1).not.toBe(c2);
    expect(c1.startsWith(`v1:${keyId(keyA)}:`)).toBe(true);
    expect(c1).not.toContain(secret.slice(6));
    expect(box.decrypt(c1, id)).toBe(secret);
    expect(box.decrypt(c2, id)).toBe(secret);
  });

  it('refuses a ciphertext moved to another subscription, tampered with, or truncated', () => {
    const box = new SecretBox(keyA);
    const c = box.encrypt(secret, id);
    expect(() => box.decrypt(c, 'wh_00000000-0000-4000-8000-000000000000')).toThrow(/authentication/);
    const blob = Buffer.from(c.split(':')[2]!, 'base64url');
    blob[14] = (blob[14] ?? 0) ^ 1;
    expect(() => box.decrypt(`v1:${keyId(keyA)}:${blob.toString('base64url')}`, id)).toThrow(/authentication/);
    expect(() => box.decrypt(`v1:${keyId(keyA)}:AAAA`, id)).toThrow(/truncated/);
    expect(() => box.decrypt('garbage', id)).toThrow(SecretKeyError);
  });

  it('decrypts with a previous key after rotation, and says which key is missing otherwise', () => {
    const old = new SecretBox(keyA).encrypt(secret, id);
    const rotated = new SecretBox(keyB, [keyA]);
    expect(rotated.decrypt(old, id)).toBe(secret);
    expect(rotated.needsRotation(old)).toBe(true);
    expect(rotated.needsRotation(rotated.encrypt(secret, id))).toBe(false);
    expect(() => new SecretBox(keyB).decrypt(old, id)).toThrow(new RegExp(`key ${keyId(keyA)}`));
  });

  it('is built from the environment form (base64 key, comma-separated previous keys)', () => {
    const box = SecretBox.fromEnv(keyB.toString('base64'), ` ${keyA.toString('base64')} ,`);
    expect(box.keyId).toBe(keyId(keyB));
    expect(box.decrypt(new SecretBox(keyA).encrypt(secret, id), id)).toBe(secret);
  });
});
