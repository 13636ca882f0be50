import { randomUUID } from 'node:crypto';
import { AppError, type KeyId, type PoolClient } from '@fcd/service-kit';
import { type AccountKey, keyNotFound, keyPrefix } from '../domain/account-keys';
import { digestApiKey, generateApiKey, lastFour } from '../domain/api-key';

/** The rows of an account's own keys (`/v1/account/keys`) and the steps AccountStore's key changes share. */
export interface AccountKeyRow {
  id: string;
  account_id: string;
  last4: string;
  name: string;
  prefix: string | null;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

export const ACCOUNT_KEY_COLUMNS = 'id, account_id, last4, name, prefix, created_at, last_used_at, expires_at, revoked_at';

export function toAccountKey(r: AccountKeyRow): AccountKey {
  return {
    id: r.id as KeyId,
    accountId: r.account_id,
    last4: r.last4,
    name: r.name,
    prefix: r.prefix,
    createdAt: r.created_at.toISOString(),
    lastUsedAt: r.last_used_at?.toISOString() ?? null,
    expiresAt: r.expires_at?.toISOString() ?? null,
    revokedAt: r.revoked_at?.toISOString() ?? null,
  };
}

/** Locks the account's row (so key changes of one account are serialised) and counts its live keys; NOT_FOUND without it. */
export async function lockAndCountLive(client: PoolClient, accountId: string, now: number): Promise<number> {
  const locked = await client.query('SELECT 1 FROM usage.accounts WHERE id = $1 FOR UPDATE', [accountId]);
  if (locked.rowCount === 0) throw new AppError('NOT_FOUND', `No such account: ${accountId.slice(0, 60)}`);
  const { rows } = await client.query<{ live: number }>(
    `SELECT count(*)::int AS live FROM usage.api_keys
      WHERE account_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`,
    [accountId, new Date(now)],
  );
  return rows[0]?.live ?? 0;
}

export async function keyOf(client: PoolClient, accountId: string, keyId: KeyId): Promise<AccountKey> {
  const { rows } = await client.query<AccountKeyRow>(
    `SELECT ${ACCOUNT_KEY_COLUMNS} FROM usage.api_keys WHERE id = $2 AND account_id = $1`,
    [accountId, keyId],
  );
  if (!rows[0]) throw keyNotFound(keyId);
  return toAccountKey(rows[0]);
}

export async function insertKey(
  client: PoolClient,
  accountId: string,
  name: string,
  expiresAt: string | null,
): Promise<{ key: AccountKey; apiKey: string }> {
  const apiKey = generateApiKey();
  const { rows } = await client.query<AccountKeyRow>(
    `INSERT INTO usage.api_keys (id, account_id, digest, last4, prefix, name, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${ACCOUNT_KEY_COLUMNS}`,
    [`key_${randomUUID()}`, accountId, digestApiKey(apiKey), lastFour(apiKey), keyPrefix(apiKey), name, expiresAt],
  );
  return { key: toAccountKey(rows[0] as AccountKeyRow), apiKey };
}
