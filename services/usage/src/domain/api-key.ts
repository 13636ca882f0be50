import { hash, randomBytes } from 'node:crypto';

/** API keys (docs/metering.md): `fcd_` + 32 characters [A-Za-z0-9] from a CSPRNG. */
const API_KEY_PREFIX = 'fcd_';
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const KEY_PATTERN = /^fcd_[A-Za-z0-9]{32}$/;

export function isWellFormedKey(value: string): boolean {
  return KEY_PATTERN.test(value);
}

/** Uniform base62 by rejection sampling (no modulo bias). */
export function generateApiKey(random: (n: number) => Buffer = randomBytes): string {
  let out = '';
  while (out.length < 32) {
    for (const byte of random(48)) {
      if (byte < 248 && out.length < 32) out += ALPHABET[byte % 62];
    }
  }
  return API_KEY_PREFIX + out;
}

/** Keys are stored only as their SHA-256 digest (hex), plus the last 4 characters for display. */
export function digestApiKey(key: string): string {
  // One-shot crypto.hash (a string is hashed as UTF-8): the same digest without a Hash object, per item of every batch.
  return hash('sha256', key, 'hex');
}

export function lastFour(key: string): string {
  return key.slice(-4);
}
