import type { Clock, Logger } from '@fcd/service-kit';

/** Where tiers come from: the usage service (GetAccounts). Accounts it does not know are left out. */
export interface AccountDirectory {
  /** account id → tier rank (free 0 < pro 1 < enterprise 2), for the accounts that exist. */
  ranks(accountIds: readonly string[]): Promise<Map<string, number>>;
}

export interface EntitlementOptions {
  directory: AccountDirectory;
  clock: Clock;
  logger: Logger;
  /** How long a looked-up rank is trusted: a downgrade takes effect within this time. */
  ttlMs: number;
  /** The lowest rank entitled to webhooks ("Pro and above"). */
  minRank: number;
  /** Called when the directory cannot answer (the accounts are then treated as entitled). */
  onUnavailable?: () => void;
}

/** Ids per directory call (the usage service's limit). */
const CHUNK = 1000;
/**
 * After the directory failed, its accounts count as entitled for this long
 * (at most the TTL) before it is asked again: a usage service that hangs costs
 * one deadline per this interval, not one per claim.
 */
const UNAVAILABLE_RETRY_MS = 5_000;
/** Accounts remembered at most (the cache is cleared beyond; it refills on the next claims). */
const MAX_CACHED = 100_000;

/**
 * Which accounts are no longer entitled to webhooks, from the usage service's
 * tiers, cached per account for `ttlMs`. It fails open: when the usage service
 * cannot answer, or does not know an account, the account counts as entitled —
 * a lost delivery is worse than a few sent after a downgrade. Only a rank the
 * usage service reports below `minRank` counts as not entitled.
 */
export class Entitlements {
  private readonly cache = new Map<string, { rank: number | null; until: number }>();

  constructor(private readonly o: EntitlementOptions) {}

  /** The accounts among `accountIds` known to be below `minRank` now. */
  async notEntitled(accountIds: Iterable<string>): Promise<Set<string>> {
    const now = this.o.clock.now();
    const unique = [...new Set(accountIds)];
    const misses = unique.filter((id) => {
      const hit = this.cache.get(id);
      return !hit || hit.until <= now;
    });
    for (let i = 0; i < misses.length; i += CHUNK) {
      const chunk = misses.slice(i, i + CHUNK);
      let ranks: Map<string, number>;
      try {
        ranks = await this.o.directory.ranks(chunk);
      } catch (err) {
        this.o.onUnavailable?.();
        this.o.logger.warn(
          { err: { message: (err as Error).message }, accounts: chunk.length },
          'usage service unavailable: tiers not checked, deliveries sent',
        );
        this.remember(chunk, new Map(), now + Math.min(this.o.ttlMs, UNAVAILABLE_RETRY_MS));
        continue;
      }
      this.remember(chunk, ranks, now + this.o.ttlMs);
    }
    const out = new Set<string>();
    for (const id of unique) {
      const hit = this.cache.get(id);
      if (hit && hit.until > now && hit.rank !== null && hit.rank < this.o.minRank) out.add(id);
    }
    return out;
  }

  /** Caches the ranks of `ids` until `until`; ids without a rank count as entitled (unknown). */
  private remember(ids: readonly string[], ranks: Map<string, number>, until: number): void {
    if (this.cache.size + ids.length > MAX_CACHED) this.cache.clear();
    for (const id of ids) this.cache.set(id, { rank: ranks.get(id) ?? null, until });
  }

  /** Forgets an account's rank (after acting on it, so a re-upgrade is seen at once). */
  forget(accountId: string): void {
    this.cache.delete(accountId);
  }
}
