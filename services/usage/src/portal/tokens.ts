import { hash, randomBytes } from 'node:crypto';
import { digestApiKey, isWellFormedKey } from '../domain/api-key';

/**
 * The tokens of the customer portal (docs/api.md, "Portal"; ADR 0016): 32 bytes from a CSPRNG in
 * base64url after a prefix that tells them from API keys (`fcd_`) and from each other. Only their
 * SHA-256 digests are stored, as for API keys.
 */
const SESSION_PREFIX = 'fcds_';
const LINK_PREFIX = 'fcdl_';
const SESSION_PATTERN = /^fcds_[A-Za-z0-9_-]{43}$/;
const LINK_PATTERN = /^fcdl_[A-Za-z0-9_-]{43}$/;

/** A session lasts 12 hours; a sign-in link can be redeemed within 10 minutes of its minting. */
export const SESSION_TTL_MS = 12 * 3_600_000;
export const LINK_TTL_MS = 10 * 60_000;

/**
 * Sessions share the key cache with API keys (digest → principal): a session's entry is this tag
 * and its digest, so the lookup of cache misses knows which table to ask.
 */
export const SESSION_CACHE_TAG = 'session:';

type Random = (n: number) => Buffer;

export function newSessionToken(random: Random = randomBytes): string {
  return SESSION_PREFIX + random(32).toString('base64url');
}

export function newLinkToken(random: Random = randomBytes): string {
  return LINK_PREFIX + random(32).toString('base64url');
}

export function isSessionToken(value: string): boolean {
  return SESSION_PATTERN.test(value);
}

export function isLinkToken(value: string): boolean {
  return LINK_PATTERN.test(value);
}

/** SHA-256 (hex) of a session or link token: what the tables keep. */
export function tokenDigest(token: string): string {
  return hash('sha256', token, 'hex');
}

/**
 * The key cache's entry of a credential sent in AuthorizeItem.api_key: an API key's digest, a
 * session's tagged digest, or undefined for anything else (refused without a lookup).
 */
export function credentialDigest(value: string): string | undefined {
  if (isWellFormedKey(value)) return digestApiKey(value);
  if (isSessionToken(value)) return SESSION_CACHE_TAG + tokenDigest(value);
  return undefined;
}
