import { randomUUID } from 'node:crypto';
import { AppError, type Pool } from '@fcd/service-kit';
import type { TierChange } from '../domain/proration';
import type { KeyPrincipal, Tier } from '../domain/tiers';
import { AccountKeys } from './account-keys';
import { readTierHistory } from './statements';

export interface AccountRow {
  id: string;
  name: string;
  tier: string;
  dailyLimit: number;
  createdAt: string;
}

/** All SQL of accounts, tiers, key lookups and daily usage (key changes: `keys`). */
export class AccountStore {
  /** The accounts' API keys: their changes and audit entries (store/account-keys.ts). */
  readonly keys: AccountKeys;

  constructor(private readonly pool: Pool) {
    this.keys = new AccountKeys(pool);
  }

  async principalsByDigest(digests: string[]): Promise<Map<string, KeyPrincipal>> {
    const { rows } = await this.pool.query<PrincipalRow>(
      `SELECT k.digest, k.id AS key_id, a.id AS account_id, t.name AS tier, t.rank,
              COALESCE(a.daily_limit_override, t.daily_limit) AS daily_limit, t.hard_limit, t.overage_rate_usd::text,
              k.revoked_at IS NOT NULL AS revoked, k.expires_at
         FROM usage.api_keys k
         JOIN usage.accounts a ON a.id = k.account_id
         JOIN usage.tiers t ON t.name = a.tier
        WHERE k.digest = ANY($1::text[])`,
      [digests],
    );
    return new Map(rows.map((r) => [r.digest, principalOf(r)]));
  }

  async tiers(): Promise<Tier[]> {
    const { rows } = await this.pool.query<{
      name: string;
      daily_limit: number;
      hard_limit: boolean;
      overage_rate_usd: string;
      rank: number;
    }>('SELECT name, daily_limit, hard_limit, overage_rate_usd::text, rank FROM usage.tiers ORDER BY rank');
    return rows.map((r) => ({
      name: r.name,
      dailyLimit: r.daily_limit,
      hardLimit: r.hard_limit,
      overageRateUsd: normalizeRate(r.overage_rate_usd),
      rank: r.rank,
    }));
  }

  /** Tier and rank of each of the given accounts that exists. */
  async tiersOf(accountIds: readonly string[]): Promise<Array<{ accountId: string; tier: string; rank: number }>> {
    if (accountIds.length === 0) return [];
    const { rows } = await this.pool.query<{ id: string; tier: string; rank: number }>(
      `SELECT a.id, a.tier, t.rank FROM usage.accounts a JOIN usage.tiers t ON t.name = a.tier
        WHERE a.id = ANY($1::text[]) ORDER BY a.id`,
      [[...new Set(accountIds)]],
    );
    return rows.map((r) => ({ accountId: r.id, tier: r.tier, rank: r.rank }));
  }

  async accountWithTier(accountId: string): Promise<{ account: AccountRow; tier: Tier } | undefined> {
    const { rows } = await this.pool.query<{
      id: string;
      name: string;
      tier: string;
      daily_limit: number;
      created_at: Date;
      hard_limit: boolean;
      overage_rate_usd: string;
      rank: number;
      tier_limit: number;
    }>(
      `SELECT a.id, a.name, a.tier, COALESCE(a.daily_limit_override, t.daily_limit) AS daily_limit, a.created_at,
              t.hard_limit, t.overage_rate_usd::text, t.rank, t.daily_limit AS tier_limit
         FROM usage.accounts a JOIN usage.tiers t ON t.name = a.tier WHERE a.id = $1`,
      [accountId],
    );
    const r = rows[0];
    if (!r) return undefined;
    return {
      account: { id: r.id, name: r.name, tier: r.tier, dailyLimit: r.daily_limit, createdAt: r.created_at.toISOString() },
      tier: {
        name: r.tier,
        dailyLimit: r.tier_limit,
        hardLimit: r.hard_limit,
        overageRateUsd: normalizeRate(r.overage_rate_usd),
        rank: r.rank,
      },
    };
  }

  async createAccount(input: { name: string; tier: string; dailyLimit?: number | undefined }): Promise<AccountRow> {
    await this.requireTier(input.tier);
    const id = `acct_${randomUUID()}`;
    await this.pool.query('INSERT INTO usage.accounts (id, name, tier, daily_limit_override) VALUES ($1, $2, $3, $4)', [
      id,
      input.name,
      input.tier,
      input.dailyLimit ?? null,
    ]);
    const found = await this.accountWithTier(id);
    if (!found) throw new Error('account vanished after insert');
    return found.account;
  }

  async listAccounts(): Promise<AccountRow[]> {
    const { rows } = await this.pool.query<{ id: string; name: string; tier: string; daily_limit: number; created_at: Date }>(
      `SELECT a.id, a.name, a.tier, COALESCE(a.daily_limit_override, t.daily_limit) AS daily_limit, a.created_at
         FROM usage.accounts a JOIN usage.tiers t ON t.name = a.tier ORDER BY a.created_at, a.id`,
    );
    return rows.map((r) => ({ id: r.id, name: r.name, tier: r.tier, dailyLimit: r.daily_limit, createdAt: r.created_at.toISOString() }));
  }

  async setTier(accountId: string, tier: string, dailyLimit?: number | null): Promise<AccountRow> {
    await this.requireTier(tier);
    const { rowCount } = await this.pool.query(
      'UPDATE usage.accounts SET tier = $2, daily_limit_override = $3, updated_at = now() WHERE id = $1',
      [accountId, tier, dailyLimit ?? null],
    );
    if (rowCount === 0) throw new AppError('NOT_FOUND', `No such account: ${accountId}`);
    const found = await this.accountWithTier(accountId);
    if (!found) throw new AppError('NOT_FOUND', `No such account: ${accountId}`);
    return found.account;
  }

  /**
   * Records when keys were last used: each key's time only ever moves forward. Written with the
   * counts' batched flush, never per request (`last_used_at` lags by the flush interval).
   */
  async touchKeys(uses: Array<{ keyId: string; usedAt: number }>): Promise<void> {
    if (uses.length === 0) return;
    await this.pool.query(
      `UPDATE usage.api_keys k SET last_used_at = GREATEST(k.last_used_at, u.t)
         FROM unnest($1::text[], $2::timestamptz[]) AS u(id, t)
        WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.t)`,
      [uses.map((u) => u.keyId), uses.map((u) => new Date(u.usedAt))],
    );
  }

  /** Persists counters idempotently: the stored count only ever grows to the highest value seen. */
  async upsertDailyCounts(rows: Array<{ accountId: string; day: string; count: number }>): Promise<void> {
    if (rows.length === 0) return;
    await this.pool.query(
      `INSERT INTO usage.daily_usage (account_id, day, request_count)
       SELECT a, d, c FROM unnest($1::text[], $2::date[], $3::bigint[]) AS t(a, d, c)
       WHERE EXISTS (SELECT 1 FROM usage.accounts WHERE id = a)
       ON CONFLICT (account_id, day) DO UPDATE
         SET request_count = GREATEST(usage.daily_usage.request_count, EXCLUDED.request_count), updated_at = now()`,
      [rows.map((r) => r.accountId), rows.map((r) => r.day), rows.map((r) => r.count)],
    );
  }

  /** Counts of the given (account, day) pairs; missing pairs are 0. */
  async dailyCounts(pairs: Array<{ accountId: string; day: string }>): Promise<Map<string, number>> {
    const { rows } = await this.pool.query<{ account_id: string; day: string; request_count: number }>(
      `SELECT u.account_id, u.day, u.request_count
         FROM usage.daily_usage u
         JOIN unnest($1::text[], $2::date[]) AS p(a, d) ON u.account_id = p.a AND u.day = p.d`,
      [pairs.map((p) => p.accountId), pairs.map((p) => p.day)],
    );
    return new Map(rows.map((r) => [`${r.account_id}|${r.day}`, r.request_count]));
  }

  async countsBetween(accountId: string, from: string, to: string): Promise<Array<{ day: string; count: number }>> {
    const { rows } = await this.pool.query<{ day: string; request_count: number }>(
      'SELECT day, request_count FROM usage.daily_usage WHERE account_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day',
      [accountId, from, to],
    );
    return rows.map((r) => ({ day: r.day, count: r.request_count }));
  }

  /** The account's tier history before `endMs` (the usage history's limit of each day). */
  tierHistory(accountId: string, endMs: number): Promise<TierChange[]> {
    return readTierHistory(this.pool, accountId, endMs);
  }

  /** Fail-open mode only: one exact atomic increment in Postgres (refused past a hard limit). */
  async incrementInDatabase(accountId: string, day: string, hardLimit: number | null): Promise<{ allowed: boolean; count: number }> {
    const { rows } = await this.pool.query<{ request_count: number }>(
      `INSERT INTO usage.daily_usage AS u (account_id, day, request_count) VALUES ($1, $2, 1)
       ON CONFLICT (account_id, day) DO UPDATE SET request_count = u.request_count + 1, updated_at = now()
         WHERE $3::bigint IS NULL OR u.request_count < $3::bigint
       RETURNING request_count`,
      [accountId, day, hardLimit],
    );
    if (rows[0]) return { allowed: true, count: rows[0].request_count };
    const current = await this.dailyCounts([{ accountId, day }]);
    return { allowed: false, count: current.get(`${accountId}|${day}`) ?? 0 };
  }

  private async requireTier(tier: string): Promise<void> {
    const { rowCount } = await this.pool.query('SELECT 1 FROM usage.tiers WHERE name = $1', [tier]);
    if (rowCount === 0)
      throw new AppError('VALIDATION_ERROR', `Unknown tier: ${tier}`, {
        details: { fields: [{ field: 'tier', message: 'unknown tier' }] },
      });
  }
}

/** "0.003000" → "0.003", "0.000000" → "0.000" (at least 3 decimals, trailing zeros trimmed). */
/** A credential's row as the key and portal-session lookups select it (digest → principal). */
export interface PrincipalRow {
  digest: string;
  key_id: string;
  account_id: string;
  tier: string;
  rank: number;
  daily_limit: number;
  hard_limit: boolean;
  overage_rate_usd: string;
  revoked: boolean;
  expires_at: Date | null;
}

/** The principal the meter counts a credential as, from its row. */
export function principalOf(r: PrincipalRow): KeyPrincipal {
  return {
    keyId: r.key_id,
    accountId: r.account_id,
    tier: r.tier,
    tierRank: r.rank,
    dailyLimit: r.daily_limit,
    hardLimit: r.hard_limit,
    overageRateUsd: normalizeRate(r.overage_rate_usd),
    revoked: r.revoked,
    expiresAt: r.expires_at?.getTime() ?? null,
  };
}

function normalizeRate(value: string): string {
  const [int, frac = ''] = value.split('.');
  return `${int}.${frac.replace(/0+$/, '').padEnd(3, '0')}`;
}
