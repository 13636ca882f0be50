import type { Clock } from '@fcd/service-kit/pure';
import type { KeyPrincipal } from './tiers';

/**
 * In-process cache of key lookups (digest → principal, or null for unknown).
 * Bounded staleness: an entry is used for at most ttlMs (negative entries
 * negativeTtlMs), so a revocation or tier change made elsewhere takes effect
 * within that time on every replica. Bounded size: oldest entries are evicted.
 *
 * A known key's entry outlives its TTL by outageTtlMs, for one use only: while the key store
 * (Postgres) is unreachable, `getDuringOutage` still answers with the last principal it gave, so
 * known keys keep being served (docs/metering.md, "Postgres unavailable").
 */
export class KeyCache {
  private readonly entries = new Map<string, { value: KeyPrincipal | null; expires: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly negativeTtlMs: number,
    private readonly maxEntries = 100_000,
    private readonly outageTtlMs = 0,
  ) {}

  /** The fresh entry: a principal, null (known to be unknown), or undefined (ask the key store). */
  get(digest: string): KeyPrincipal | null | undefined {
    const e = this.entries.get(digest);
    if (!e) return undefined;
    const now = this.clock.now();
    if (e.expires > now) return e.value;
    if (e.value === null || e.expires + this.outageTtlMs <= now) this.entries.delete(digest);
    return undefined;
  }

  /** A known key's last principal, up to outageTtlMs past its TTL; for use only while the key store is unreachable. */
  getDuringOutage(digest: string): KeyPrincipal | undefined {
    const e = this.entries.get(digest);
    if (!e?.value || e.expires + this.outageTtlMs <= this.clock.now()) return undefined;
    return e.value;
  }

  set(digest: string, value: KeyPrincipal | null): void {
    this.entries.delete(digest); // re-inserted last: eviction takes the least recently looked-up
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(digest, { value, expires: this.clock.now() + (value ? this.ttlMs : this.negativeTtlMs) });
  }

  /** Drops entries of one account (after a local revoke or tier change). */
  evictAccount(accountId: string): void {
    for (const [digest, e] of this.entries) if (e.value?.accountId === accountId) this.entries.delete(digest);
  }

  clear(): void {
    this.entries.clear();
  }
}
