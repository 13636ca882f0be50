import { columnsOf, type FieldSpecs, isoTime, isoTimeOrNull, recordOf, viewNames, viewOf } from '../fields';
import type { PauseReason } from '../limits';
import type { ListPosition } from '../lists';
import { redactHeaders } from './redact';
import type { DeliveryStatus } from './types';

/**
 * The delivery log's resources, declared once (../fields.ts): a delivery and each of its
 * attempts. The columns the log selects, the row → record mapping and the public view derive
 * from DELIVERY_FIELDS and ATTEMPT_FIELDS.
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
  timings: AttemptTimings;
  /** The pause of the whole subscription this attempt started (a 429/503 Retry-After, or the receiver unreachable); null: none. */
  subscription_paused: { until: string; reason: PauseReason } | null;
}

export interface AttemptTimings {
  dns_ms: number | null;
  connect_ms: number | null;
  tls_ms: number | null;
  first_byte_ms: number | null;
  connection_reused: boolean | null;
}

/** An attempt as the log reads it: its view, and the delivery it belongs to. */
export interface LoggedAttempt extends AttemptView {
  delivery_id: string;
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

/** A delivery as the log reads it, before its attempts are added. */
export type LoggedDelivery = Omit<DeliveryView, 'attempts'>;

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

type Row = Record<string, unknown>;

const TIMING_FIELDS = {
  dns_ms: { view: true },
  connect_ms: { view: true },
  tls_ms: { view: true },
  first_byte_ms: { view: true },
  connection_reused: { view: true },
} satisfies FieldSpecs<AttemptTimings>;

/** The pause an attempt started: both of its columns, or none. */
function pauseOf(_: unknown, row: Row): AttemptView['subscription_paused'] {
  const until = row.paused_until as Date | null;
  const reason = row.pause_reason as PauseReason | null;
  return until && reason ? { until: until.toISOString(), reason } : null;
}

/** A delivery attempt's fields (table `webhook.delivery_attempts`). */
export const ATTEMPT_FIELDS = {
  delivery_id: { view: false },
  attempt: { view: true },
  started_at: { read: isoTime, view: true },
  latency_ms: { sql: 'duration_ms AS latency_ms', view: true },
  response_status: { view: true },
  error: { view: true },
  outcome: { view: true },
  // Redacted when stored (./record.ts); again here for attempts stored before that.
  request_headers: { read: redactHeaders, view: true },
  response_headers: { read: redactHeaders, view: true },
  response_headers_truncated: { view: true },
  response_body: { view: true },
  response_body_truncated: { view: true },
  timings: {
    sql: columnsOf(TIMING_FIELDS),
    read: (_: unknown, row: Row) => recordOf<AttemptTimings>(TIMING_FIELDS, row),
    view: true,
  },
  subscription_paused: { sql: 'paused_until, pause_reason', read: pauseOf, view: true },
} satisfies FieldSpecs<LoggedAttempt>;

/** A delivery's fields (table `webhook.deliveries`); its attempts are added from ATTEMPT_FIELDS. */
export const DELIVERY_FIELDS = {
  id: { view: true },
  event_id: { view: true },
  event_type: { view: true },
  status: { view: true },
  attempt_count: { view: true },
  // Only a pending delivery is due; a finished one keeps its last due time, not shown.
  next_attempt_at: { read: (value: Date | null, row: Row) => (row.status === 'pending' ? isoTimeOrNull(value) : null), view: true },
  created_at: { read: isoTime, view: true },
  updated_at: { read: isoTime, view: true },
} satisfies FieldSpecs<LoggedDelivery>;

export const ATTEMPT_VIEW = viewNames(ATTEMPT_FIELDS);
export const DELIVERY_VIEW = viewNames(DELIVERY_FIELDS);

/** A delivery and its attempts (oldest first) → its public view. */
export function deliveryView(delivery: LoggedDelivery, attempts: readonly LoggedAttempt[]): DeliveryView {
  return { ...viewOf(DELIVERY_VIEW, delivery), attempts: attempts.map((a) => viewOf(ATTEMPT_VIEW, a)) };
}
