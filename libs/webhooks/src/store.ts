import { AppError, type KeysetPage, keysetPage, type PageRequest, type Pool, withTransaction } from '@fcd/service-kit';
import { columnsOf, recordOf } from './fields';
import { selectNewestFirst } from './keyset-select';
import { DEFAULT_MAX_IN_FLIGHT } from './limits';
import { type ListPosition, subscriptionList } from './lists';
import { type SecretBox, secretLast4 } from './secrets';
import {
  MANUAL_DEACTIVATION,
  type NewSubscription,
  SUBSCRIPTION_FIELDS,
  type Subscription,
  type SubscriptionPage,
  type SubscriptionPatch,
} from './subscription';

/**
 * All SQL for subscriptions (schema `webhook`). Every account-facing method
 * takes the account id and filters on it, so another account's id behaves
 * exactly like an unknown one.
 */

type Row = Record<string, unknown>;

const COLUMNS = columnsOf(SUBSCRIPTION_FIELDS);

const toSubscription = (row: Row): Subscription => recordOf<Subscription>(SUBSCRIPTION_FIELDS, row);

export class SubscriptionStore {
  constructor(
    private readonly pool: Pool,
    private readonly secrets: SecretBox,
  ) {}

  /**
   * Inserts a subscription unless the account already has `maxPerAccount`
   * (LIMIT_REACHED). The count and the insert run under a per-account advisory
   * lock, so concurrent creates cannot overshoot the limit.
   */
  async create(input: NewSubscription, maxPerAccount: number): Promise<Subscription> {
    return withTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`webhook:subscriptions:${input.account_id}`]);
      const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook.subscriptions WHERE account_id = $1', [
        input.account_id,
      ]);
      if ((rows[0]?.n ?? 0) >= maxPerAccount) {
        throw new AppError(
          'LIMIT_REACHED',
          `An account can have at most ${maxPerAccount} webhook subscriptions. Delete one to add another.`,
          {
            details: { limit: maxPerAccount },
          },
        );
      }
      const now = new Date(input.now);
      const inserted = await client.query<Row>(
        `INSERT INTO webhook.subscriptions (id, account_id, url, events, facility_ids, secret_ciphertext, secret_last4, is_active, created_at, updated_at,
                                            rate_limit_per_second, max_in_flight, filter)
         VALUES ($1, $2, $3, $4, $5::uuid[], $6, $7, true, $8, $8, $9, $10, $11::jsonb)
         RETURNING ${COLUMNS}`,
        [
          input.id,
          input.account_id,
          input.url,
          input.events,
          input.facility_ids,
          this.secrets.encrypt(input.secret, input.id),
          secretLast4(input.secret),
          now,
          input.rate_limit_per_second ?? null,
          input.max_in_flight ?? DEFAULT_MAX_IN_FLIGHT,
          input.filter ? JSON.stringify(input.filter) : null,
        ],
      );
      return toSubscription(inserted.rows[0] as Row);
    });
  }

  async get(accountId: string, id: string): Promise<Subscription | undefined> {
    const { rows } = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM webhook.subscriptions WHERE id = $1 AND account_id = $2`, [
      id,
      accountId,
    ]);
    return rows[0] ? toSubscription(rows[0]) : undefined;
  }

  /** Newest first; `after` continues after the last row of the previous page. */
  async list(accountId: string, limit: number, after?: ListPosition): Promise<SubscriptionPage> {
    return selectNewestFirst<Subscription>(
      this.pool,
      { table: 'webhook.subscriptions', fields: SUBSCRIPTION_FIELDS, owner: ['account_id', accountId] },
      limit,
      after,
    );
  }

  /** A page of the account's subscriptions for a request's limit and cursor (400 VALIDATION_ERROR for a bad one). */
  page(accountId: string, request: PageRequest): Promise<KeysetPage<Subscription>> {
    return keysetPage(subscriptionList<Subscription>(accountId), request, (limit, after) => this.list(accountId, limit, after));
  }

  async count(accountId: string): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook.subscriptions WHERE account_id = $1', [
      accountId,
    ]);
    return rows[0]?.n ?? 0;
  }

  /**
   * Applies any subset of url, events, facility_ids, filter, is_active, rate_limit_per_second and max_in_flight.
   * `is_active: true` reactivates and resets the failure bookkeeping;
   * `is_active: false` deactivates with reason "manual" (an already inactive
   * subscription keeps its original time and reason).
   */
  async update(accountId: string, id: string, patch: SubscriptionPatch, now: number): Promise<Subscription | undefined> {
    const sets: string[] = ['updated_at = $3'];
    const params: unknown[] = [id, accountId, new Date(now)];
    const param = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    if (patch.url !== undefined) sets.push(`url = ${param(patch.url)}`);
    if (patch.events !== undefined) sets.push(`events = ${param(patch.events)}`);
    if (patch.facility_ids !== undefined) sets.push(`facility_ids = ${param(patch.facility_ids)}::uuid[]`);
    if (patch.filter !== undefined) sets.push(`filter = ${param(patch.filter === null ? null : JSON.stringify(patch.filter))}::jsonb`);
    if (patch.rate_limit_per_second !== undefined) sets.push(`rate_limit_per_second = ${param(patch.rate_limit_per_second)}::int`);
    if (patch.max_in_flight !== undefined) sets.push(`max_in_flight = ${param(patch.max_in_flight)}::int`);
    if (patch.is_active === true) {
      sets.push(
        'is_active = true',
        'deactivated_at = NULL',
        'deactivation_reason = NULL',
        'consecutive_failures = 0',
        'last_failure_at = NULL',
        'connection_failures = 0',
        'paused_until = NULL',
        'pause_reason = NULL',
      );
    } else if (patch.is_active === false) {
      sets.push(
        'is_active = false',
        'deactivated_at = CASE WHEN is_active THEN $3 ELSE deactivated_at END',
        `deactivation_reason = CASE WHEN is_active THEN ${param(MANUAL_DEACTIVATION)} ELSE deactivation_reason END`,
      );
    }
    const sql = `UPDATE webhook.subscriptions SET ${sets.join(', ')} WHERE id = $1 AND account_id = $2 RETURNING ${COLUMNS}`;
    if (patch.is_active !== false) {
      const { rows } = await this.pool.query<Row>(sql, params);
      return rows[0] ? toSubscription(rows[0]) : undefined;
    }
    // Deactivation stops pending retries: they are cancelled with it.
    return withTransaction(this.pool, async (client) => {
      const { rows } = await client.query<Row>(sql, params);
      if (!rows[0]) return undefined;
      await client.query(
        `UPDATE webhook.deliveries SET status = 'cancelled', next_attempt_at = NULL, updated_at = $2
          WHERE subscription_id = $1 AND status = 'pending'`,
        [id, new Date(now)],
      );
      return toSubscription(rows[0]);
    });
  }

  /**
   * Replaces the signing secret (the clear one is returned once, by the caller). With an overlap
   * the secret being replaced keeps signing, beside the new one, until `now + overlapSeconds`;
   * without one (or when a rotation replaces a rotation) only the newest secrets sign.
   */
  async rotateSecret(accountId: string, id: string, secret: string, now: number, overlapSeconds = 0): Promise<Subscription | undefined> {
    const endsAt = overlapSeconds > 0 ? new Date(now + overlapSeconds * 1000) : null;
    const { rows } = await this.pool.query<Row>(
      `UPDATE webhook.subscriptions
          SET previous_secret_ciphertext = CASE WHEN $6::timestamptz IS NULL THEN NULL ELSE secret_ciphertext END,
              secret_rotation_ends_at = $6, secret_ciphertext = $3, secret_last4 = $4, updated_at = $5
        WHERE id = $1 AND account_id = $2 RETURNING ${COLUMNS}`,
      [id, accountId, this.secrets.encrypt(secret, id), secretLast4(secret), new Date(now), endsAt],
    );
    return rows[0] ? toSubscription(rows[0]) : undefined;
  }

  /** Deletes the subscription and (cascade) its deliveries, so nothing more is sent to it. */
  async delete(accountId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM webhook.subscriptions WHERE id = $1 AND account_id = $2', [id, accountId]);
    return (rowCount ?? 0) > 0;
  }

  // -------------------------------------------------------------------------
  // For the dispatcher (no account filter: it acts for every account).

  /** The clear signing secret of a subscription (the dispatcher signs with it); undefined when it is gone. */
  async signingSecret(id: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ secret_ciphertext: string }>(
      'SELECT secret_ciphertext FROM webhook.subscriptions WHERE id = $1',
      [id],
    );
    return rows[0] ? this.secrets.decrypt(rows[0].secret_ciphertext, id) : undefined;
  }

  /** Deactivates an active subscription for a reason (e.g. "consecutive_failures"); false when it was not active. */
  async deactivate(id: string, reason: string, now: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE webhook.subscriptions SET is_active = false, deactivated_at = $2, deactivation_reason = $3, updated_at = $2
        WHERE id = $1 AND is_active`,
      [id, new Date(now), reason],
    );
    return (rowCount ?? 0) > 0;
  }
}

/**
 * Deactivates every active subscription of an account for a reason (an
 * operator's `deactivate-account`, e.g. after a downgrade below Pro) and
 * cancels their pending deliveries, in one transaction. Returns the ids
 * deactivated now; already inactive ones keep their time and reason.
 */
export async function deactivateAccountSubscriptions(pool: Pool, accountId: string, reason: string, now: number): Promise<string[]> {
  return withTransaction(pool, async (client) => {
    // Rows locked in id order first, as the dispatcher's recording locks them: no deadlock between the two.
    const { rows: locked } = await client.query<{ id: string }>(
      'SELECT id FROM webhook.subscriptions WHERE account_id = $1 AND is_active ORDER BY id FOR NO KEY UPDATE',
      [accountId],
    );
    if (locked.length === 0) return [];
    const { rows } = await client.query<{ id: string }>(
      `UPDATE webhook.subscriptions SET is_active = false, deactivated_at = $2, deactivation_reason = $3, updated_at = $2
        WHERE id = ANY($1::text[]) AND is_active RETURNING id`,
      [locked.map((r) => r.id), new Date(now), reason],
    );
    const ids = rows.map((r) => r.id).sort();
    if (ids.length > 0) {
      await client.query(
        `UPDATE webhook.deliveries SET status = 'cancelled', next_attempt_at = NULL, updated_at = $2
          WHERE subscription_id = ANY($1::text[]) AND status = 'pending'`,
        [ids, new Date(now)],
      );
    }
    return ids;
  });
}
