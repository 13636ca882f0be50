import type { Pool } from '@fcd/service-kit';
import type { PauseReason } from '../limits';
import type { Bookkeeping, DeliveryBefore, SubscriptionBefore } from './bookkeeping';
import { redactHeaders } from './redact';
import { type AttemptDebug, type AttemptRecord, DEACTIVATION_CONSECUTIVE_FAILURES } from './types';

/**
 * The SQL of `DispatchQueue.recordAttempts`: lock and read what the
 * bookkeeping needs, then write what it decided (attempt rows, deliveries,
 * subscriptions) in one statement, plus the deactivations.
 */

type Client = Pick<Pool, 'query'>;

/**
 * An attempt's debug record as one jsonb parameter of the batch INSERT (null: not recorded). Every
 * attempt row is written through here: credentials in its headers are redacted before storage.
 */
function debugColumns(debug: AttemptDebug | undefined): string | null {
  if (!debug) return null;
  return JSON.stringify({
    request_headers: redactHeaders(debug.requestHeaders),
    response_headers: redactHeaders(debug.responseHeaders),
    response_headers_truncated: debug.responseHeadersTruncated,
    response_body: debug.responseBody,
    response_body_truncated: debug.responseBodyTruncated,
    dns_ms: debug.timings.dnsMs,
    connect_ms: debug.timings.connectMs,
    tls_ms: debug.timings.tlsMs,
    first_byte_ms: debug.timings.firstByteMs,
    connection_reused: debug.timings.connectionReused,
  });
}

/**
 * Locks the subscriptions, then the deliveries, in id order (one round trip). FOR NO KEY UPDATE
 * (what the UPDATEs take anyway) leaves the fan-out's foreign-key checks (KEY SHARE) unblocked.
 */
export async function lockForRecord(client: Client, subIds: readonly string[], deliveryIds: readonly string[]) {
  const locked = await client.query<{
    kind: 's' | 'd';
    id: string;
    subscription_id: string | null;
    last_success_at: Date | null;
    is_active: boolean | null;
    status: string | null;
    attempt_count: number | null;
    paused_until: Date | null;
    pause_reason: PauseReason | null;
    connection_failures: number | null;
  }>(
    `WITH s AS (SELECT id, last_success_at, is_active, paused_until, pause_reason, connection_failures
                  FROM webhook.subscriptions WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE),
          d AS (SELECT id, subscription_id, status, attempt_count FROM webhook.deliveries WHERE id = ANY($2::text[]) ORDER BY id FOR NO KEY UPDATE)
     SELECT 's' AS kind, id, NULL::text AS subscription_id, last_success_at, is_active, NULL::text AS status, NULL::int AS attempt_count,
            paused_until, pause_reason, connection_failures FROM s
     UNION ALL
     SELECT 'd', id, subscription_id, NULL, NULL, status, attempt_count, NULL, NULL, NULL FROM d`,
    [subIds, deliveryIds],
  );
  const subscriptions = new Map<string, SubscriptionBefore>();
  const deliveries = new Map<string, DeliveryBefore>();
  for (const r of locked.rows) {
    if (r.kind === 's') {
      subscriptions.set(r.id, {
        lastSuccessAt: r.last_success_at?.getTime() ?? null,
        isActive: r.is_active === true,
        pause: {
          connectionFailures: r.connection_failures ?? 0,
          pausedUntil: r.paused_until?.getTime() ?? null,
          pauseReason: r.pause_reason,
        },
      });
    } else {
      deliveries.set(r.id, {
        subscriptionId: r.subscription_id as string,
        status: r.status as string,
        attemptCount: r.attempt_count as number,
      });
    }
  }
  return { subscriptions, deliveries };
}

const isoAt = (t: number | null) => (t === null ? null : new Date(t).toISOString());

/** The attempt rows' INSERT, a CTE of both writes below: `a` is the unnest of their columns (`from`). */
function insertAttempts(from: string): string {
  return `INSERT INTO webhook.delivery_attempts (delivery_id, attempt, started_at, duration_ms, response_status, error, outcome,
                                          request_headers, response_headers, response_headers_truncated, response_body,
                                          response_body_truncated, dns_ms, connect_ms, tls_ms, first_byte_ms, connection_reused,
                                          paused_until, pause_reason)
   SELECT a.id, a.attempt, a.started_at, a.duration_ms, a.response_status, a.error, a.outcome,
          a.debug->'request_headers', NULLIF(a.debug->'response_headers', 'null'::jsonb),
          COALESCE((a.debug->>'response_headers_truncated')::boolean, false), a.debug->>'response_body',
          COALESCE((a.debug->>'response_body_truncated')::boolean, false), (a.debug->>'dns_ms')::float8,
          (a.debug->>'connect_ms')::float8, (a.debug->>'tls_ms')::float8, (a.debug->>'first_byte_ms')::float8,
          (a.debug->>'connection_reused')::boolean, a.paused_until, a.pause_reason
     FROM ${from}
   ON CONFLICT (delivery_id, attempt) DO NOTHING`;
}

/** One round trip for every write: the attempt rows, the deliveries, the subscriptions' bookkeeping. */
const WRITE_SQL = `WITH attempts AS (
   ${insertAttempts(`unnest($1::text[], $2::int[], $3::timestamptz[], $4::int[], $5::int[], $6::text[], $7::text[], $17::jsonb[],
                 $18::timestamptz[], $19::text[])
          AS a(id, attempt, started_at, duration_ms, response_status, error, outcome, debug, paused_until, pause_reason)`)}),
 deliveries AS (
   UPDATE webhook.deliveries d SET status = u.status, next_attempt_at = u.next_at, leased_until = NULL, manual = false, updated_at = u.at
     FROM unnest($8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[]) AS u(id, status, next_at, at)
    WHERE d.id = ANY ($8::text[]) AND d.id = u.id)
 UPDATE webhook.subscriptions s
    SET consecutive_failures = CASE WHEN u.reset THEN u.failures ELSE s.consecutive_failures + u.failures END,
        last_success_at = GREATEST(s.last_success_at, u.success_at),
        last_failure_at = COALESCE(u.failure_at, s.last_failure_at),
        paused_until = u.paused_until, pause_reason = u.pause_reason, connection_failures = u.connection_failures
   FROM unnest($12::text[], $13::bool[], $14::int[], $15::timestamptz[], $16::timestamptz[], $20::timestamptz[], $21::text[], $22::int[])
        AS u(id, reset, failures, success_at, failure_at, paused_until, pause_reason, connection_failures)
  WHERE s.id = u.id`;

/**
 * The deliveries are found by primary key (`id = ANY`): joined to the unnest alone, a fresh table
 * without statistics let the planner take the pending-only index for the small side and read every
 * pending row of a backlog per statement (seen under the paced benchmark).
 *
 * A batch of successes in one autocommit statement, with what `bookkeep` gives them: a success
 * needs nothing read first. Its delivery succeeds if it is still pending on this attempt (else only
 * the attempt row is written: `applied` false); its subscription's failure counters reset and
 * last_success_at advances; a pause stays as it is. The subscriptions are locked first, in id order,
 * as in `lockForRecord`. Returns the ids of the applied deliveries.
 */
const SUCCESSES_SQL = `WITH subs AS (
   SELECT id FROM webhook.subscriptions WHERE id = ANY($8::text[]) ORDER BY id FOR NO KEY UPDATE),
 u AS (SELECT * FROM unnest($1::text[], $2::int[], $3::timestamptz[], $7::timestamptz[]) AS u(id, attempt, started_at, at)),
 applied AS (
   UPDATE webhook.deliveries d SET status = 'succeeded', next_attempt_at = NULL, leased_until = NULL, manual = false, updated_at = u.at
     FROM u
    WHERE d.id = ANY ($1::text[]) AND d.id = u.id AND d.status = 'pending' AND d.attempt_count = u.attempt
      AND d.subscription_id IN (SELECT id FROM subs)
   RETURNING d.id, d.subscription_id, u.started_at),
 attempts AS (
   ${insertAttempts(`(SELECT v.*, NULL::text AS error, 'success'::text AS outcome, NULL::timestamptz AS paused_until, NULL::text AS pause_reason
             FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::int[], $5::int[], $6::jsonb[])
                  AS v(id, attempt, started_at, duration_ms, response_status, debug)
            WHERE EXISTS (SELECT 1 FROM webhook.deliveries e WHERE e.id = v.id)) AS a`)}),
 touched AS (
   UPDATE webhook.subscriptions s
      SET consecutive_failures = 0, connection_failures = 0, last_success_at = GREATEST(s.last_success_at, t.success_at)
     FROM (SELECT subscription_id, max(started_at) AS success_at FROM applied GROUP BY subscription_id) t
    WHERE s.id = t.subscription_id)
 SELECT id FROM applied`;

/** Records a batch of successful attempts (`SUCCESSES_SQL`); the ids of the deliveries it applied to. */
export async function recordSuccesses(client: Client, items: readonly AttemptRecord[]): Promise<Set<string>> {
  const { rows } = await client.query<{ id: string }>(SUCCESSES_SQL, [
    items.map((i) => i.claimed.id),
    items.map((i) => i.claimed.attempt),
    items.map((i) => isoAt(i.result.startedAt)),
    items.map((i) => Math.round(i.result.durationMs)),
    items.map((i) => i.result.responseStatus),
    items.map((i) => debugColumns(i.result.debug)),
    items.map((i) => isoAt(i.result.finishedAt)),
    [...new Set(items.map((i) => i.claimed.subscriptionId))],
  ]);
  return new Set(rows.map((r) => r.id));
}

/** The parameters of WRITE_SQL, column by column. */
function writeParams(b: Bookkeeping): unknown[] {
  const { attempts, deliveries: updates, subscriptions: touched, pauses } = b;
  return [
    attempts.map((i) => i.claimed.id),
    attempts.map((i) => i.claimed.attempt),
    attempts.map((i) => isoAt(i.result.startedAt)),
    attempts.map((i) => Math.round(i.result.durationMs)),
    attempts.map((i) => i.result.responseStatus),
    attempts.map((i) => i.result.error?.slice(0, 500) ?? null),
    attempts.map((i) => (i.result.success ? 'success' : 'failure')),
    updates.map((u) => u.id),
    updates.map((u) => u.status),
    updates.map((u) => isoAt(u.nextAttemptAt)),
    updates.map((u) => isoAt(u.at)),
    touched.map((s) => s.id),
    touched.map((s) => s.reset),
    touched.map((s) => s.failures),
    touched.map((s) => isoAt(s.successAt)),
    touched.map((s) => isoAt(s.failureAt)),
    attempts.map((i) => debugColumns(i.result.debug)),
    attempts.map((i) => isoAt(pauses.get(i.claimed.id)?.until ?? null)),
    attempts.map((i) => pauses.get(i.claimed.id)?.reason ?? null),
    touched.map((s) => isoAt(s.pause.pausedUntil)),
    touched.map((s) => s.pause.pauseReason),
    touched.map((s) => s.pause.connectionFailures),
  ];
}

/** Writes the bookkeeping of a batch; fills in each deactivation's `cancelled`. */
export async function writeBookkeeping(client: Client, b: Bookkeeping): Promise<void> {
  await client.query(WRITE_SQL, writeParams(b));
  for (const d of b.deactivations) {
    const at = new Date(d.at);
    await client.query(
      `UPDATE webhook.subscriptions SET is_active = false, deactivated_at = $2, deactivation_reason = $3, updated_at = $2
        WHERE id = $1 AND is_active`,
      [d.subscriptionId, at, DEACTIVATION_CONSECUTIVE_FAILURES],
    );
    const c = await client.query(
      `UPDATE webhook.deliveries SET status = 'cancelled', next_attempt_at = NULL, updated_at = $2
        WHERE subscription_id = $1 AND status = 'pending'`,
      [d.subscriptionId, at],
    );
    d.outcome.cancelled = c.rowCount ?? 0;
  }
}
