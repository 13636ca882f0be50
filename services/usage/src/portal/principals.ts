import type { KeyPrincipal } from '../domain/tiers';
import type { AccountStore } from '../store/accounts';
import type { PortalStore } from './store';
import { SESSION_CACHE_TAG } from './tokens';

/**
 * The principals of the key cache's misses (`credentialDigest` entries): API keys from the key
 * table, portal sessions (tagged entries) from the session table, one query each at most. Without
 * a session store (tests of the meter alone), sessions are unknown.
 */
export async function principalsOf(
  stores: { accounts: AccountStore; sessions?: PortalStore | undefined },
  digests: string[],
): Promise<Map<string, KeyPrincipal>> {
  const keys = digests.filter((d) => !d.startsWith(SESSION_CACHE_TAG));
  const sessions = digests.filter((d) => d.startsWith(SESSION_CACHE_TAG)).map((d) => d.slice(SESSION_CACHE_TAG.length));
  const [byKey, bySession] = await Promise.all([
    keys.length > 0 ? stores.accounts.principalsByDigest(keys) : new Map<string, KeyPrincipal>(),
    sessions.length > 0 && stores.sessions ? stores.sessions.principalsByDigest(sessions) : new Map<string, KeyPrincipal>(),
  ]);
  for (const [digest, principal] of bySession) byKey.set(SESSION_CACHE_TAG + digest, principal);
  return byKey;
}
