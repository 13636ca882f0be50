import type { UsageMetrics } from '../metrics';
import type { AccountStore } from '../store/accounts';
import type { CounterStore } from '../store/counters';

/** How stale `last_used_at` may be (docs/api.md, "API keys": it may lag by up to a minute). */
export const LAST_USED_RESOLUTION_MS = 60_000;

export const pairKey = (accountId: string, day: string) => `${accountId}|${day}`;

export interface DayCountOf {
  accountId: string;
  day: string;
  count: number;
}

/**
 * The write-behind of the counters: the highest count seen per (account,
 * day) since the last flush, written to Postgres in one idempotent batch
 * (GREATEST), and the reconciliation that copies every Redis counter there.
 */
export class WriteBehind {
  private pending = new Map<string, DayCountOf>();
  /** How many of the pending counts are of each day (usually one day, two just after midnight). */
  private pendingDays = new Map<string, number>();
  /** When each key was last used since the last flush (its `last_used_at`, written with the counts). */
  private lastUsed = new Map<string, number>();
  /** The `last_used_at` this replica last wrote of each key: a use within a minute of it is not written again. */
  private written = new Map<string, number>();

  constructor(private readonly deps: { accounts: AccountStore; counters: CounterStore; metrics: UsageMetrics }) {}

  remember(accountId: string, day: string, count: number): void {
    const k = pairKey(accountId, day);
    const prev = this.pending.get(k);
    if (!prev) this.pendingDays.set(day, (this.pendingDays.get(day) ?? 0) + 1);
    if (!prev || prev.count < count) this.pending.set(k, { accountId, day, count });
  }

  /**
   * Notes a use of a key, written at the next flush; a key in steady use is written once a minute,
   * not at every flush (`last_used_at` lags by up to LAST_USED_RESOLUTION_MS, as documented).
   */
  used(keyId: string, at: number): void {
    if (!keyId) return;
    if (at - (this.written.get(keyId) ?? Number.NEGATIVE_INFINITY) < LAST_USED_RESOLUTION_MS) return;
    const prev = this.lastUsed.get(keyId);
    if (prev === undefined || prev < at) this.lastUsed.set(keyId, at);
  }

  /** The unflushed count of (account, day); undefined: none. */
  get(accountId: string, day: string): number | undefined {
    return this.pending.get(pairKey(accountId, day))?.count;
  }

  /**
   * The unflushed counts of `accountId` for days in [from, before): a lookup per day that has any
   * pending count (a usage report asks this per request, so it does not walk every account's).
   */
  daysOf(accountId: string, from: string, before: string): DayCountOf[] {
    const out: DayCountOf[] = [];
    for (const day of this.pendingDays.keys()) {
      if (day < from || day >= before) continue;
      const q = this.pending.get(pairKey(accountId, day));
      if (q) out.push(q);
    }
    return out;
  }

  size(): number {
    return this.pending.size;
  }

  /** Writes the highest counts seen since the last flush; on failure they are kept for the next one. */
  async flush(): Promise<number> {
    const written = await this.flushCounts();
    await this.flushLastUsed();
    return written;
  }

  private async flushCounts(): Promise<number> {
    if (this.pending.size === 0) return 0;
    const batch = this.pending;
    this.pending = new Map();
    this.pendingDays = new Map();
    try {
      await this.deps.accounts.upsertDailyCounts([...batch.values()]);
      this.deps.metrics.flushed.inc(batch.size);
      return batch.size;
    } catch (err) {
      for (const v of batch.values()) this.remember(v.accountId, v.day, v.count);
      this.deps.metrics.storeErrors.inc({ store: 'postgres' });
      throw err;
    }
  }

  /** Writes the keys' last uses; on failure they are kept for the next flush (a later use replaces an earlier one). */
  private async flushLastUsed(): Promise<void> {
    if (this.lastUsed.size === 0) return;
    const batch = this.lastUsed;
    this.lastUsed = new Map();
    try {
      await this.deps.accounts.touchKeys([...batch].map(([keyId, usedAt]) => ({ keyId, usedAt })));
      for (const [keyId, at] of batch) this.written.set(keyId, at);
    } catch (err) {
      for (const [keyId, at] of batch) this.used(keyId, at);
      this.deps.metrics.storeErrors.inc({ store: 'postgres' });
      throw err;
    }
  }

  /**
   * Copies every counter in Redis into Postgres (GREATEST). Run at start-up and
   * periodically, so counts of a replica that died before its flush still
   * reach Postgres as long as Redis kept them.
   */
  async reconcile(): Promise<number> {
    const all = await this.deps.counters.scanAll();
    for (let i = 0; i < all.length; i += 1000) await this.deps.accounts.upsertDailyCounts(all.slice(i, i + 1000));
    return all.length;
  }
}
