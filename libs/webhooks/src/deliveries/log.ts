import { type KeysetPage, keysetPage, type PageRequest, type Pool, type Rows } from '@fcd/service-kit';
import { columnsOf, recordOf } from '../fields';
import { selectNewestFirst } from '../keyset-select';
import { deliveryList } from '../lists';
import {
  ATTEMPT_FIELDS,
  DELIVERY_FIELDS,
  type DeliveryPosition,
  type DeliveryView,
  deliveryView,
  type LoggedAttempt,
  type LoggedDelivery,
  type ManualDelivery,
} from './view';

/**
 * The delivery log the webhook API shows: a subscription's deliveries with
 * every attempt, a manual retry, and the manual `webhook.test` delivery. The
 * caller has checked that the subscription belongs to the account.
 */

const ATTEMPT_COLUMNS = columnsOf(ATTEMPT_FIELDS);
const DELIVERY_COLUMNS = columnsOf(DELIVERY_FIELDS);

const toDelivery = (row: Record<string, unknown>) => recordOf<LoggedDelivery>(DELIVERY_FIELDS, row);

export class DeliveryLog {
  constructor(private readonly pool: Pool) {}

  /** Newest first, each with every attempt; `after` continues after the last row of the previous page. */
  async list(subscriptionId: string, limit: number, after?: DeliveryPosition): Promise<Rows<DeliveryView>> {
    const page = await selectNewestFirst<LoggedDelivery>(
      this.pool,
      { table: 'webhook.deliveries', fields: DELIVERY_FIELDS, owner: ['subscription_id', subscriptionId] },
      limit,
      after,
    );
    return { items: await this.withAttempts(page.items), has_more: page.has_more };
  }

  /** A page of the subscription's deliveries for a request's limit and cursor (400 VALIDATION_ERROR for a bad one). */
  page(subscriptionId: string, request: PageRequest): Promise<KeysetPage<DeliveryView>> {
    return keysetPage(deliveryList<DeliveryView>(subscriptionId), request, (limit, after) => this.list(subscriptionId, limit, after));
  }

  async get(subscriptionId: string, deliveryId: string): Promise<DeliveryView | undefined> {
    const { rows } = await this.pool.query<Record<string, unknown>>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook.deliveries WHERE id = $1 AND subscription_id = $2`,
      [deliveryId, subscriptionId],
    );
    return (await this.withAttempts(rows.map(toDelivery)))[0];
  }

  /**
   * Schedules one manual attempt now for a finished delivery (succeeded,
   * failed or cancelled); a pending one is already scheduled and stays as it
   * is. undefined when there is no such delivery.
   */
  async retry(subscriptionId: string, deliveryId: string, now: number): Promise<DeliveryView | undefined> {
    await this.pool.query(
      `UPDATE webhook.deliveries SET status = 'pending', manual = true, next_attempt_at = $3, updated_at = $3
        WHERE id = $1 AND subscription_id = $2 AND status <> 'pending'`,
      [deliveryId, subscriptionId, new Date(now)],
    );
    return this.get(subscriptionId, deliveryId);
  }

  /**
   * A manual delivery of a given event (the `webhook.test` event), due now, of an active
   * subscription; undefined when the subscription is gone or inactive by the time it is written.
   * Its row is locked for the insert, so a concurrent delete either waits for it or wins (and
   * takes the delivery with it): never a foreign-key error.
   */
  async createManual(input: ManualDelivery): Promise<DeliveryView | undefined> {
    const at = new Date(input.now);
    const { rowCount } = await this.pool.query(
      `WITH s AS (SELECT id FROM webhook.subscriptions WHERE id = $2 AND is_active FOR KEY SHARE)
       INSERT INTO webhook.deliveries (id, subscription_id, event_id, event_type, body, status, manual, attempt_count, next_attempt_at, created_at, updated_at)
       SELECT $1, s.id, $3, $4, $5, 'pending', true, 0, $6, $6, $6 FROM s`,
      [input.id, input.subscriptionId, input.eventId, input.eventType, input.body, at],
    );
    return rowCount === 0 ? undefined : this.get(input.subscriptionId, input.id);
  }

  /** The deliveries with every attempt of each, oldest first. */
  private async withAttempts(deliveries: LoggedDelivery[]): Promise<DeliveryView[]> {
    if (deliveries.length === 0) return [];
    const { rows } = await this.pool.query<Record<string, unknown>>(
      `SELECT ${ATTEMPT_COLUMNS} FROM webhook.delivery_attempts WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id, attempt`,
      [deliveries.map((d) => d.id)],
    );
    const attempts = new Map<string, LoggedAttempt[]>();
    for (const row of rows) {
      const attempt = recordOf<LoggedAttempt>(ATTEMPT_FIELDS, row);
      const list = attempts.get(attempt.delivery_id);
      if (list) list.push(attempt);
      else attempts.set(attempt.delivery_id, [attempt]);
    }
    return deliveries.map((d) => deliveryView(d, attempts.get(d.id) ?? []));
  }
}
