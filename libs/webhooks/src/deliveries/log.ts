import {
  fetchSize,
  type KeysetPage,
  keysetAfter,
  keysetOrderBy,
  keysetPage,
  type PageRequest,
  type Pool,
  type Rows,
  takeRows,
} from '@fcd/service-kit';
import type { PauseReason } from '../limits';
import { deliveryList, type ListPosition, NEWEST_FIRST } from '../lists';
import { redactHeaders } from './redact';
import type { DeliveryStatus } from './types';

/**
 * The delivery log the webhook API shows: a subscription's deliveries with
 * every attempt, a manual retry, and the manual `webhook.test` delivery. The
 * caller has checked that the subscription belongs to the account.
 */

export interface AttemptView {
  attempt: number;
  started_at: string;
  latency_ms: number | null;
  response_status: number | null;
  error: string | null;
  outcome: 'success' | 'failure';
  /** The headers sent (signatures included: the owner may see them); null for attempts recorded before this was kept. */
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  response_headers_truncated: boolean;
  /** The first 4 KiB of the response body (UTF-8). */
  response_body: string | null;
  response_body_truncated: boolean;
  /** Phase durations in ms; null where the phase did not happen (a reused connection has no DNS, connect or TLS step). */
  timings: {
    dns_ms: number | null;
    connect_ms: number | null;
    tls_ms: number | null;
    first_byte_ms: number | null;
    connection_reused: boolean | null;
  };
  /** The pause of the whole subscription this attempt started (a 429/503 Retry-After, or the receiver unreachable); null: none. */
  subscription_paused: { until: string; reason: PauseReason } | null;
}

export interface DeliveryView {
  id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: string | null;
  created_at: string;
  updated_at: string;
  attempts: AttemptView[];
}

export type DeliveryPosition = ListPosition;

/** A manual delivery of one event to a subscription (the `webhook.test` event), due at `now`. */
export interface ManualDelivery {
  id: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  body: string;
  now: number;
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

interface AttemptRow {
  delivery_id: string;
  attempt: number;
  started_at: Date;
  duration_ms: number | null;
  response_status: number | null;
  error: string | null;
  outcome: 'success' | 'failure';
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  response_headers_truncated: boolean;
  response_body: string | null;
  response_body_truncated: boolean;
  dns_ms: number | null;
  connect_ms: number | null;
  tls_ms: number | null;
  first_byte_ms: number | null;
  connection_reused: boolean | null;
  paused_until: Date | null;
  pause_reason: PauseReason | null;
}

const DELIVERY_COLUMNS = 'id, event_id, event_type, status, attempt_count, next_attempt_at, created_at, updated_at';

function toView(row: DeliveryRow, attempts: AttemptRow[]): DeliveryView {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    status: row.status,
    attempt_count: row.attempt_count,
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    attempts: attempts.map((a) => ({
      attempt: a.attempt,
      started_at: a.started_at.toISOString(),
      latency_ms: a.duration_ms,
      response_status: a.response_status,
      error: a.error,
      outcome: a.outcome,
      // Redacted when stored (./record.ts); again here for attempts stored before that.
      request_headers: redactHeaders(a.request_headers),
      response_headers: redactHeaders(a.response_headers),
      response_headers_truncated: a.response_headers_truncated,
      response_body: a.response_body,
      response_body_truncated: a.response_body_truncated,
      timings: {
        dns_ms: a.dns_ms,
        connect_ms: a.connect_ms,
        tls_ms: a.tls_ms,
        first_byte_ms: a.first_byte_ms,
        connection_reused: a.connection_reused,
      },
      subscription_paused: a.paused_until && a.pause_reason ? { until: a.paused_until.toISOString(), reason: a.pause_reason } : null,
    })),
  };
}

export class DeliveryLog {
  constructor(private readonly pool: Pool) {}

  /** Newest first, each with every attempt; `after` continues after the last row of the previous page. */
  async list(subscriptionId: string, limit: number, after?: DeliveryPosition): Promise<Rows<DeliveryView>> {
    const params: unknown[] = [subscriptionId, fetchSize(limit)];
    let where = 'subscription_id = $1';
    if (after) {
      params.push(new Date(after.created_at), after.id);
      where += ` AND ${keysetAfter(NEWEST_FIRST, ['$3', '$4'])}`;
    }
    const { rows } = await this.pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook.deliveries WHERE ${where} ORDER BY ${keysetOrderBy(NEWEST_FIRST)} LIMIT $2`,
      params,
    );
    const page = takeRows(rows, limit);
    const attempts = await this.attemptsOf(page.items.map((r) => r.id));
    return { items: page.items.map((r) => toView(r, attempts.get(r.id) ?? [])), has_more: page.has_more };
  }

  /** A page of the subscription's deliveries for a request's limit and cursor (400 VALIDATION_ERROR for a bad one). */
  page(subscriptionId: string, request: PageRequest): Promise<KeysetPage<DeliveryView>> {
    return keysetPage(deliveryList<DeliveryView>(subscriptionId), request, (limit, after) => this.list(subscriptionId, limit, after));
  }

  async get(subscriptionId: string, deliveryId: string): Promise<DeliveryView | undefined> {
    const { rows } = await this.pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook.deliveries WHERE id = $1 AND subscription_id = $2`,
      [deliveryId, subscriptionId],
    );
    const row = rows[0];
    if (!row) return undefined;
    return toView(row, (await this.attemptsOf([row.id])).get(row.id) ?? []);
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

  private async attemptsOf(ids: string[]): Promise<Map<string, AttemptRow[]>> {
    const out = new Map<string, AttemptRow[]>();
    if (ids.length === 0) return out;
    const { rows } = await this.pool.query<AttemptRow>(
      `SELECT delivery_id, attempt, started_at, duration_ms, response_status, error, outcome, request_headers, response_headers,
              response_headers_truncated, response_body, response_body_truncated, dns_ms, connect_ms, tls_ms, first_byte_ms,
              connection_reused, paused_until, pause_reason
         FROM webhook.delivery_attempts WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id, attempt`,
      [ids],
    );
    for (const r of rows) {
      const list = out.get(r.delivery_id) ?? [];
      list.push(r);
      out.set(r.delivery_id, list);
    }
    return out;
  }
}
