import { randomUUID } from 'node:crypto';
import { AppError, type Pool } from '@fcd/service-kit';
import { digestApiKey } from '../domain/api-key';
import type { KeyPrincipal } from '../domain/tiers';
import { type PrincipalRow, principalOf } from '../store/accounts';
import { LINK_TTL_MS, newLinkToken, newSessionToken, SESSION_TTL_MS, tokenDigest } from './tokens';

/** A live session as the portal sees it (times in Unix ms). */
export interface PortalSessionView {
  accountId: string;
  tier: string;
  expiresAt: number;
}

/** A session just opened: its clear token is given once. */
export interface OpenedSession {
  token: string;
  session: PortalSessionView;
}

/**
 * A session is live while it is neither revoked nor expired and, when it was made from an API key,
 * while that key is live too. Its principal (for the meter) says the same with `revoked` and
 * `expiresAt`, so the meter's own checks refuse it at the same moment.
 */
const PRINCIPAL_COLUMNS = `s.digest, s.id, COALESCE(s.key_id, '') AS key_id, s.account_id, t.name AS tier, t.rank,
       COALESCE(a.daily_limit_override, t.daily_limit) AS daily_limit, t.hard_limit, t.overage_rate_usd::text,
       (s.revoked_at IS NOT NULL OR k.revoked_at IS NOT NULL) AS revoked, LEAST(s.expires_at, k.expires_at) AS expires_at`;
const PRINCIPAL_JOINS = `JOIN usage.accounts a ON a.id = s.account_id
  JOIN usage.tiers t ON t.name = a.tier
  LEFT JOIN usage.api_keys k ON k.id = s.key_id`;

/** The SQL of portal links and sessions (schema `usage`, migration 0004_portal_sessions). */
export class PortalStore {
  constructor(private readonly pool: Pool) {}

  /** A one-time sign-in link for the account, valid for 10 minutes (NOT_FOUND: no such account). */
  async createLink(accountId: string, now: number): Promise<{ token: string; expiresAt: number }> {
    const token = newLinkToken();
    const { rows } = await this.pool.query<{ expires_at: Date }>(
      `INSERT INTO usage.portal_links (digest, account_id, created_at, expires_at)
       SELECT $1, id, $3, $4 FROM usage.accounts WHERE id = $2 RETURNING expires_at`,
      [tokenDigest(token), accountId, new Date(now), new Date(now + LINK_TTL_MS)],
    );
    const row = rows[0];
    if (!row) throw new AppError('NOT_FOUND', `No such account: ${accountId}`);
    return { token, expiresAt: row.expires_at.getTime() };
  }

  /**
   * Redeems a link and opens its session in one statement: the link's UPDATE matches only while it
   * is unused and unexpired, so of any number of concurrent redemptions exactly one opens a session.
   */
  async redeemLink(linkToken: string, now: number): Promise<OpenedSession | undefined> {
    const token = newSessionToken();
    return this.opened(
      token,
      `WITH link AS (
         UPDATE usage.portal_links SET used_at = $3 WHERE digest = $1 AND used_at IS NULL AND expires_at > $3 RETURNING account_id
       ), s AS (
         INSERT INTO usage.portal_sessions (id, account_id, digest, origin, created_at, expires_at)
         SELECT $2, account_id, $4, 'link', $3, $5 FROM link RETURNING account_id, expires_at
       )
       SELECT s.account_id, a.tier, s.expires_at FROM s JOIN usage.accounts a ON a.id = s.account_id`,
      [tokenDigest(linkToken), `pses_${randomUUID()}`, new Date(now), tokenDigest(token), new Date(now + SESSION_TTL_MS)],
    );
  }

  /** Opens a session with a live API key; it ends with the key (revoked or expired), 12 hours at most. */
  async sessionFromKey(apiKey: string, now: number): Promise<OpenedSession | undefined> {
    const token = newSessionToken();
    return this.opened(
      token,
      `WITH s AS (
         INSERT INTO usage.portal_sessions (id, account_id, digest, origin, key_id, created_at, expires_at)
         SELECT $2, k.account_id, $4, 'key', k.id, $3, LEAST($5::timestamptz, k.expires_at)
           FROM usage.api_keys k
          WHERE k.digest = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $3)
         RETURNING account_id, expires_at
       )
       SELECT s.account_id, a.tier, s.expires_at FROM s JOIN usage.accounts a ON a.id = s.account_id`,
      [digestApiKey(apiKey), `pses_${randomUUID()}`, new Date(now), tokenDigest(token), new Date(now + SESSION_TTL_MS)],
    );
  }

  private async opened(token: string, sql: string, params: unknown[]): Promise<OpenedSession | undefined> {
    const { rows } = await this.pool.query<{ account_id: string; tier: string; expires_at: Date }>(sql, params);
    const row = rows[0];
    return row && { token, session: { accountId: row.account_id, tier: row.tier, expiresAt: row.expires_at.getTime() } };
  }

  /** The live session of a token, or undefined. */
  async session(token: string, now: number): Promise<PortalSessionView | undefined> {
    const found = (await this.principalsByDigest([tokenDigest(token)])).get(tokenDigest(token));
    if (!found || found.revoked || (found.expiresAt ?? 0) <= now) return undefined;
    return { accountId: found.accountId, tier: found.tier, expiresAt: found.expiresAt ?? 0 };
  }

  /** Revokes a session; its account when it was live (its cached entries must then be dropped). */
  async revoke(token: string, now: number): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ account_id: string }>(
      'UPDATE usage.portal_sessions SET revoked_at = $2 WHERE digest = $1 AND revoked_at IS NULL RETURNING account_id',
      [tokenDigest(token), new Date(now)],
    );
    return rows[0]?.account_id;
  }

  /**
   * Session digest → the principal the meter counts it as: the account's, with the key the session
   * was made from (its last use is the session's; a link's session has none) and the session's id.
   */
  async principalsByDigest(digests: string[]): Promise<Map<string, KeyPrincipal>> {
    if (digests.length === 0) return new Map();
    const { rows } = await this.pool.query<PrincipalRow & { id: string }>(
      `SELECT ${PRINCIPAL_COLUMNS} FROM usage.portal_sessions s ${PRINCIPAL_JOINS} WHERE s.digest = ANY($1::text[])`,
      [digests],
    );
    return new Map(rows.map((r) => [r.digest, { ...principalOf(r), sessionId: r.id }]));
  }
}
