/** What decrypts a subscription's signing secret (a SecretBox, or one wrapped by `withSecretCache`). */
export interface SecretDecrypter {
  decrypt(ciphertext: string, subscriptionId: string): string;
}

export interface SecretCacheOptions {
  /** How long a decrypted secret is reused, in ms (default 60 s). */
  ttlMs?: number;
  /** How many secrets are kept; when full, the cache starts over (default 10 000). */
  max?: number;
  /** Epoch ms (default Date.now). */
  clock?: () => number;
}

export const SECRET_CACHE_TTL_MS = 60_000;
export const SECRET_CACHE_MAX = 10_000;

/**
 * `secrets` with each clear secret decrypted once per (subscription,
 * ciphertext) and reused for `ttlMs`. Keyed on the ciphertext itself:
 * rotating a secret re-encrypts it (fresh IV), so the first decrypt after a
 * rotation decrypts the new secret; nothing stale is ever used. A failed
 * decrypt throws and caches nothing.
 */
export function withSecretCache(secrets: SecretDecrypter, options: SecretCacheOptions = {}): SecretDecrypter {
  const ttlMs = options.ttlMs ?? SECRET_CACHE_TTL_MS;
  const max = options.max ?? SECRET_CACHE_MAX;
  const clock = options.clock ?? Date.now;
  const cache = new Map<string, { secret: string; until: number }>();
  return {
    decrypt(ciphertext: string, subscriptionId: string): string {
      const key = `${subscriptionId}\0${ciphertext}`;
      const now = clock();
      const hit = cache.get(key);
      if (hit && hit.until > now) return hit.secret;
      const secret = secrets.decrypt(ciphertext, subscriptionId);
      if (cache.size >= max) cache.clear();
      cache.set(key, { secret, until: now + ttlMs });
      return secret;
    },
  };
}
