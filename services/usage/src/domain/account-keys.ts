import { AppError, type KeyId, keyNameProblem, MAX_LIVE_KEYS, MAX_ROLL_SECONDS } from '@fcd/service-kit/pure';

/**
 * An account's own API keys (docs/api.md, "API keys"): the rules the store applies, without I/O.
 * A key is live while it is neither revoked nor past its expiry; an account has at most
 * MAX_LIVE_KEYS live keys, and a key cannot revoke the last live key of its account. The limits and
 * the name rule are service-kit's (api-keys.ts), the gateway's too.
 */
/** How many characters of a key are kept and shown as its `prefix` (`fcd_` and four more). */
const KEY_PREFIX_LENGTH = 8;

/** The name of the keys made before keys had names, and of the operator's `keys create`. */
export const DEFAULT_KEY_NAME = 'default';

/** A key as its account sees it: never the key itself. */
export interface AccountKey {
  id: KeyId;
  accountId: string;
  /** The last 4 characters of the key (operators' views only; the account sees `prefix`). */
  last4: string;
  name: string;
  /** The first 8 characters of the key; null for keys created before prefixes were kept. */
  prefix: string | null;
  createdAt: string;
  /** Written with the counts' batched flush: may lag by up to a minute. */
  lastUsedAt: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
}

export function keyPrefix(apiKey: string): string {
  return apiKey.slice(0, KEY_PREFIX_LENGTH);
}

/** True when the key authenticates at `now` (ms): not revoked, and not past its expiry. */
export function isLive(key: { revokedAt: string | null; expiresAt: string | null }, now: number): boolean {
  return key.revokedAt === null && (key.expiresAt === null || Date.parse(key.expiresAt) > now);
}

function invalid(field: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `Invalid ${field}: ${message}.`, { details: { fields: [{ field, message }] } });
}

/** A key's name: 1 to 100 characters, not only white space, no control characters. */
export function parseKeyName(value: unknown): string {
  if (typeof value !== 'string') throw invalid('name', 'must be a string');
  const problem = keyNameProblem(value);
  if (problem) throw invalid('name', problem);
  return value;
}

/** An optional expiry: an RFC 3339 date-time in the future, as ISO UTC with milliseconds; null: never. */
export function parseExpiresAt(value: unknown, now: number): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i.test(value))
    throw invalid('expires_at', 'must be an RFC 3339 date-time');
  const ms = Date.parse(value);
  if (!Number.isFinite(ms)) throw invalid('expires_at', 'must be an RFC 3339 date-time');
  if (ms <= now) throw invalid('expires_at', 'must be in the future');
  if (new Date(ms).getUTCFullYear() > 9999) throw invalid('expires_at', 'must be before year 10000');
  return new Date(ms).toISOString();
}

/** The old key's remaining life when rolled: an integer of seconds, 0 to 7 days. */
export function parseRollSeconds(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_ROLL_SECONDS)
    throw invalid('expires_in_seconds', `must be an integer from 0 to ${MAX_ROLL_SECONDS}`);
  return value;
}

export function keyNotFound(id: string): AppError {
  return new AppError('NOT_FOUND', `No API key ${id.slice(0, 60)} in this account.`);
}

export function tooManyKeys(): AppError {
  return new AppError('LIMIT_REACHED', `An account has at most ${MAX_LIVE_KEYS} live API keys; revoke one first.`, {
    details: { limit: MAX_LIVE_KEYS },
  });
}

export function lastLiveKey(): AppError {
  return new AppError('LIMIT_REACHED', 'This is the last live API key of the account; create another key before revoking it.', {
    details: { live_keys: 1 },
  });
}
