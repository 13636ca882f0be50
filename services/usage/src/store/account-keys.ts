import { AppError, type KeyId, type KeysetPage, MAX_LIVE_KEYS, type PageRequest, type Pool, withTransaction } from '@fcd/service-kit';
import { type AccountKey, isLive, keyNotFound, lastLiveKey, tooManyKeys } from '../domain/account-keys';
import { type AuditActor, type AuditRecord, mayRevokeLastLiveKey } from '../domain/audit';
import { ACCOUNT_KEY_COLUMNS, type AccountKeyRow, insertKey, keyOf, lockAndCountLive, toAccountKey } from './account-key-rows';
import { auditLogPage, recordAudit } from './audit-log';

/**
 * An account's API keys, as the account itself (`/v1/account/keys`, over gRPC) and an operator
 * (admin API, CLI) change them: the same rules for both (10 live keys), and each change writes its
 * audit entry in its own transaction (`recordAudit`). The one difference is the last live key:
 * the account cannot revoke it, an operator can (domain/audit.ts, `mayRevokeLastLiveKey`).
 * Every change locks the account's row first, so one account's changes are serialised.
 */
export class AccountKeys {
  constructor(private readonly pool: Pool) {}

  /** An account's keys, oldest first, revoked and expired ones included (never the key itself). */
  async list(accountId: string): Promise<AccountKey[]> {
    const { rows } = await this.pool.query<AccountKeyRow>(
      `SELECT ${ACCOUNT_KEY_COLUMNS} FROM usage.api_keys WHERE account_id = $1 ORDER BY created_at, id`,
      [accountId],
    );
    return rows.map(toAccountKey);
  }

  /** One page of the account's audit log, newest first. */
  auditLog(accountId: string, request: PageRequest): Promise<KeysetPage<AuditRecord>> {
    return auditLogPage(this.pool, accountId, request);
  }

  /** The account a key belongs to (key ids are unique across accounts); NOT_FOUND for an unknown one. */
  async accountOf(keyId: KeyId): Promise<string> {
    const { rows } = await this.pool.query<{ account_id: string }>('SELECT account_id FROM usage.api_keys WHERE id = $1', [keyId]);
    if (!rows[0]) throw new AppError('NOT_FOUND', `No such key: ${keyId}`);
    return rows[0].account_id;
  }

  /**
   * A new key of the account: the clear key is returned once and never stored. Refused with
   * LIMIT_REACHED when the account already has MAX_LIVE_KEYS live keys.
   */
  async create(
    accountId: string,
    input: { name: string; expiresAt: string | null },
    actor: AuditActor,
    now: number,
  ): Promise<{ key: AccountKey; apiKey: string }> {
    return withTransaction(this.pool, async (client) => {
      const live = await lockAndCountLive(client, accountId, now);
      if (live >= MAX_LIVE_KEYS) throw tooManyKeys();
      const created = await insertKey(client, accountId, input.name, input.expiresAt);
      const details = { name: input.name, expires_at: input.expiresAt };
      await recordAudit(client, { accountId, actor, action: 'key.created', targetKeyId: created.key.id, details }, now);
      return created;
    });
  }

  async rename(accountId: string, keyId: KeyId, name: string, actor: AuditActor, now: number): Promise<AccountKey> {
    return withTransaction(this.pool, async (client) => {
      await lockAndCountLive(client, accountId, now);
      const before = await keyOf(client, accountId, keyId);
      const { rows } = await client.query<AccountKeyRow>(
        `UPDATE usage.api_keys SET name = $3 WHERE id = $2 AND account_id = $1 RETURNING ${ACCOUNT_KEY_COLUMNS}`,
        [accountId, keyId, name],
      );
      const details = { name, previous_name: before.name };
      await recordAudit(client, { accountId, actor, action: 'key.renamed', targetKeyId: keyId, details }, now);
      return toAccountKey(rows[0] as AccountKeyRow);
    });
  }

  /**
   * Revokes one of the account's keys. Idempotent: an already revoked (or expired) key stays as it
   * was, and the entry says so (`was_live: false`). The account's last live key is refused with
   * LIMIT_REACHED unless the actor may revoke it.
   */
  async revoke(accountId: string, keyId: KeyId, actor: AuditActor, now: number): Promise<AccountKey> {
    return withTransaction(this.pool, async (client) => {
      const live = await lockAndCountLive(client, accountId, now);
      let key = await keyOf(client, accountId, keyId);
      const wasLive = isLive(key, now);
      if (wasLive) {
        if (live <= 1 && !mayRevokeLastLiveKey(actor)) throw lastLiveKey();
        const { rows } = await client.query<AccountKeyRow>(
          `UPDATE usage.api_keys SET revoked_at = $3 WHERE id = $2 AND account_id = $1 RETURNING ${ACCOUNT_KEY_COLUMNS}`,
          [accountId, keyId, new Date(now)],
        );
        key = toAccountKey(rows[0] as AccountKeyRow);
      }
      const details = { name: key.name, was_live: wasLive };
      await recordAudit(client, { accountId, actor, action: 'key.revoked', targetKeyId: keyId, details }, now);
      return key;
    });
  }

  /**
   * Rolls a live key: a new key with the same name and expiry, and the old one keeps working for
   * `seconds` more (never longer than it would have; 0 revokes it now). A leaked key is always
   * replaceable: the limit counts the account's other live keys, so a roll may hold MAX_LIVE_KEYS + 1
   * live keys until the old one lapses, and is refused (LIMIT_REACHED) only past that.
   */
  async roll(
    accountId: string,
    keyId: KeyId,
    seconds: number,
    actor: AuditActor,
    now: number,
  ): Promise<{ key: AccountKey; apiKey: string; old: AccountKey }> {
    return withTransaction(this.pool, async (client) => {
      const live = await lockAndCountLive(client, accountId, now);
      const old = await keyOf(client, accountId, keyId);
      if (!isLive(old, now)) throw keyNotFound(keyId);
      // The others, the old key aside, must leave room: a roll may exceed the limit by the one
      // key it replaces, never more (rolling again while the old key lives would add a key each time).
      if (live - 1 >= MAX_LIVE_KEYS) throw tooManyKeys();
      const until = new Date(now + seconds * 1000);
      const { rows } = await client.query<AccountKeyRow>(
        seconds === 0
          ? `UPDATE usage.api_keys SET revoked_at = $3 WHERE id = $2 AND account_id = $1 RETURNING ${ACCOUNT_KEY_COLUMNS}`
          : `UPDATE usage.api_keys SET expires_at = LEAST(COALESCE(expires_at, 'infinity'), $3)
              WHERE id = $2 AND account_id = $1 RETURNING ${ACCOUNT_KEY_COLUMNS}`,
        [accountId, keyId, until],
      );
      const created = await insertKey(client, accountId, old.name, old.expiresAt);
      const details = { name: old.name, new_key_id: created.key.id, expires_in_seconds: seconds };
      await recordAudit(client, { accountId, actor, action: 'key.rolled', targetKeyId: keyId, details }, now);
      return { ...created, old: toAccountKey(rows[0] as AccountKeyRow) };
    });
  }
}
