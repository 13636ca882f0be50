import { type Pool, UUID_LOWER_CASE, withTransaction } from '@fcd/service-kit';
import {
  DEFAULT_BREAKER_COOLDOWN_MS,
  DEFAULT_BREAKER_THRESHOLD,
  nextStartAt,
  type PauseOptions,
  type PauseReason,
  type PauseState,
  pauseAfterAttempt,
  rateAllowance,
} from './limits';
import type { SecretBox } from './secrets';

/**
 * All SQL for deliveries and their attempts (schema `webhook`): the
 * dispatcher's fan-out, claim and bookkeeping, and the delivery log the
 * webhook API shows. Times are epoch ms from the caller's injected clock.
 */

export const DEACTIVATION_CONSECUTIVE_FAILURES = 'consecutive_failures';
export const TEST_EVENT_TYPE = 'webhook.test';

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'cancelled';

/** An event as the fan-out needs it. */
export interface FanOutEvent {
  id: string;
  type: string;
  /** The envelope exactly as published (signed and sent byte for byte). */
  body: string;
  /** The facilities the event concerns (lower-case UUIDs). */
  facilityIds: readonly string[];
  /** Trace context to store with the deliveries (service-kit's traceContextColumn), if traced. */
  traceContext?: string | null;
}

/** A delivery claimed for one attempt (leased until `leaseUntil`). */
export interface ClaimedDelivery {
  id: string;
  subscriptionId: string;
  /** The subscription's owner (the dispatcher checks the account is still entitled to webhooks). */
  accountId: string;
  eventId: string;
  eventType: string;
  body: string;
  /** The number of this attempt (1 = first). */
  attempt: number;
  manual: boolean;
  firstAttemptAt: number;
  createdAt: number;
  url: string;
  /** The clear signing secret, decrypted at claim time. */
  secret: string;
  /** Every secret that signs this attempt, newest first: `secret`, then the previous one during a rotation overlap. */
  secrets: string[];
  /** The trace context stored by the fan-out, or null. */
  traceContext: string | null;
  /** What `releaseClaims` needs to undo this claim exactly. */
  claim: ClaimRef;
}

/** A claim as it was taken: its attempt number and the attempt times it replaced. */
export interface ClaimRef {
  id: string;
  attempt: number;
  previousFirstAttemptAt: Date | null;
  previousLastAttemptAt: Date | null;
}

export interface AttemptResult {
  startedAt: number;
  finishedAt: number;
  durationMs: number;
  responseStatus: number | null;
  error: string | null;
  success: boolean;
  /** A 429 or 503's Retry-After, in ms from the end of the attempt; null when absent. */
  retryAfterMs?: number | null;
  /** The destination is refused for good (the URL or its resolved address fails the safety rules). */
  permanent?: boolean;
  /** No HTTP response: a timeout, a connection, TLS or DNS failure (counts towards pausing the subscription). */
  connectionFailure?: boolean;
  /** What the delivery log shows to debug the receiver (absent: not recorded). */
  debug?: AttemptDebug;
}

/** An attempt's request and response as the delivery log keeps them (bounded by the sender). */
export interface AttemptDebug {
  requestHeaders: Record<string, string>;
  responseHeaders: Record<string, string> | null;
  responseHeadersTruncated: boolean;
  responseBody: string | null;
  responseBodyTruncated: boolean;
  timings: {
    dnsMs: number | null;
    connectMs: number | null;
    tlsMs: number | null;
    firstByteMs: number | null;
    connectionReused: boolean | null;
  };
}

/** What happens to a delivery after an attempt (decided by the dispatcher's pure schedule). */
export type AttemptDecision =
  | { status: 'succeeded' }
  | { status: 'pending'; nextAttemptAt: number }
  | { status: 'failed'; deactivate: boolean };

export interface DecisionInput {
  attempt: number;
  success: boolean;
  manual: boolean;
  finishedAt: number;
  firstAttemptAt: number;
  /** The subscription's last success (any delivery), before this attempt; null if none. */
  lastSuccessAt: number | null;
  /** The receiver's Retry-After (429/503), in ms; null when absent. */
  retryAfterMs?: number | null;
  /** The destination is refused for good: no retry. */
  permanent?: boolean;
}

/** One attempt to record (`recordAttempts`). */
export interface AttemptRecord {
  claimed: ClaimedDelivery;
  result: AttemptResult;
}

export interface RecordOutcome {
  decision: AttemptDecision;
  /** The pause of the subscription this attempt started, if any. */
  paused?: { until: number; reason: PauseReason } | null;
  /** False when the delivery was taken over meanwhile (lease expired) or is gone: nothing but the attempt row was written. */
  applied: boolean;
  deactivated: boolean;
  cancelled: number;
}

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

export interface DeliveryPosition {
  created_at: string;
  id: string;
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
      request_headers: a.request_headers,
      response_headers: a.response_headers,
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

/**
 * The bytes to send for a delivery stored without its body (rows written before migration 0003):
 * its payload as compact JSON with the envelope's keys in the contract's order (id, type,
 * created_at, data). jsonb does not keep the key order inside `data`.
 */
export function envelopeText(payload: string): string {
  const { id, type, created_at, data, ...rest } = JSON.parse(payload) as Record<string, unknown>;
  return JSON.stringify({ id, type, created_at, data, ...rest });
}

/** An attempt's debug record as one jsonb parameter of the batch INSERT (null: not recorded). */
function debugColumns(debug: AttemptDebug | undefined): string | null {
  if (!debug) return null;
  return JSON.stringify({
    request_headers: debug.requestHeaders,
    response_headers: debug.responseHeaders,
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

/** How long a decrypted signing secret is reused, and how many are kept (see `secretOf`). */
const SECRET_CACHE_TTL_MS = 60_000;
const SECRET_CACHE_MAX = 10_000;
/** A delivery whose signing secret cannot be decrypted is put back this long, without using up an attempt. */
export const SECRET_UNREADABLE_DEFER_MS = 5 * 60_000;

export interface DeliveryStoreHooks {
  /**
   * Deliveries of a subscription whose secret did not decrypt (a wrong
   * WEBHOOK_SECRET_KEY, a corrupted row) were put back for
   * SECRET_UNREADABLE_DEFER_MS. Never given the secret or the ciphertext.
   */
  onSecretUnreadable?(subscriptionId: string, deliveryIds: readonly string[]): void;
}

export interface DeliveryStoreOptions {
  /** The rate limit of subscriptions whose rate_limit_per_second is null (WEBHOOK_DEFAULT_RATE_LIMIT_PER_SECOND); null: none. */
  defaultRatePerSecond?: number | null;
  /** Connection failures in a row that pause a subscription (default DEFAULT_BREAKER_THRESHOLD). */
  breakerThreshold?: number;
  /** How long each of them pauses it (default DEFAULT_BREAKER_COOLDOWN_MS). */
  breakerCooldownMs?: number;
}

/** What a claim took, and when a subscription it held back by its rate limit may send again (null: none held so). */
export interface ClaimResult {
  claimed: ClaimedDelivery[];
  wakeAt: number | null;
  /** Subscriptions with due work this claim held back, by the limit that held them. */
  held: { rate: number; inFlight: number };
}

export class DeliveryStore {
  /** (subscription id, ciphertext) → the clear secret; a rotation writes a new ciphertext, so a new key. */
  private readonly secretCache = new Map<string, { secret: string; until: number }>();

  private readonly pauseOptions: PauseOptions;

  constructor(
    private readonly pool: Pool,
    private readonly secrets?: SecretBox,
    private readonly hooks: DeliveryStoreHooks = {},
    private readonly options: DeliveryStoreOptions = {},
  ) {
    this.pauseOptions = {
      threshold: options.breakerThreshold ?? DEFAULT_BREAKER_THRESHOLD,
      cooldownMs: options.breakerCooldownMs ?? DEFAULT_BREAKER_COOLDOWN_MS,
    };
  }

  // -------------------------------------------------------------------------
  // Dispatcher

  /**
   * One delivery per matching active subscription, in one statement:
   * idempotent, so a redelivered event creates nothing new. Returns the ids
   * of the deliveries created now.
   */
  async fanOut(event: FanOutEvent, now: number): Promise<string[]> {
    return (await this.fanOutMany([event], now))[0] ?? [];
  }

  /**
   * The fan-out of several events in one statement (same rows as `fanOut` of
   * each). Returns, per event in the given order, the ids of the deliveries
   * created now (none for an event already fanned out). `db` is a transaction's
   * client when the caller writes more with it (the dispatcher logs the events).
   */
  async fanOutMany(events: readonly FanOutEvent[], now: number, db: Pick<Pool, 'query'> = this.pool): Promise<string[][]> {
    if (events.length === 0) return [];
    const unique = [...new Map(events.map((e) => [e.id, e])).values()];
    // Lower-case UUIDs only, so the array literal needs no quoting.
    const facilities = unique.map(
      (e) =>
        `{${e.facilityIds
          .map((f) => f.toLowerCase())
          .filter((f) => UUID_LOWER_CASE.test(f))
          .join(',')}}`,
    );
    const { rows } = await db.query<{ id: string; event_id: string }>(
      `INSERT INTO webhook.deliveries (id, subscription_id, event_id, event_type, payload, body, status, attempt_count, next_attempt_at, created_at, updated_at, trace_context)
       SELECT 'dlv_' || gen_random_uuid(), s.id, e.id, e.type, e.body::jsonb, e.body, 'pending', 0, $6, $6, $6, e.trace_context
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS e(id, type, body, facility_ids, trace_context)
         JOIN webhook.subscriptions s
           ON s.is_active AND s.events @> ARRAY[e.type]
          AND (s.facility_ids IS NULL OR s.facility_ids && e.facility_ids::uuid[])
       ON CONFLICT (subscription_id, event_id) WHERE NOT recovery DO NOTHING
       RETURNING id, event_id`,
      [
        unique.map((e) => e.id),
        unique.map((e) => e.type),
        unique.map((e) => e.body),
        facilities,
        unique.map((e) => e.traceContext ?? null),
        new Date(now),
      ],
    );
    const created = new Map<string, string[]>();
    for (const r of rows) {
      const list = created.get(r.event_id) ?? [];
      list.push(r.id);
      created.set(r.event_id, list);
    }
    // A second copy of an event in the same call creates nothing (as a second call would).
    const seen = new Set<string>();
    return events.map((e) => {
      if (seen.has(e.id)) return [];
      seen.add(e.id);
      return created.get(e.id) ?? [];
    });
  }

  /**
   * Claims up to `limit` due deliveries (see `claim`); the deliveries only.
   */
  async claimDue(now: number, limit: number, leaseUntil: number): Promise<ClaimedDelivery[]> {
    return (await this.claim(now, limit, leaseUntil)).claimed;
  }

  /**
   * Claims up to `limit` due deliveries of active subscriptions and leases them until
   * `leaseUntil` by moving next_attempt_at (a dispatcher that dies mid-send releases them when
   * the lease ends); the attempt number is taken now. Each subscription's limits hold across
   * every replica (docs/adr/0014-per-subscription-delivery-limits.md): one transaction locks the
   * subscriptions with due work (FOR NO KEY UPDATE, in id order, so claims of several replicas
   * take turns per subscription and never deadlock), then — with a snapshot taken after those
   * locks, so every earlier claim is visible — takes from each at most
   * `max_in_flight` − its deliveries still leased, and, under a rate limit, what its pacing state
   * allows now (`rateAllowance`, on the database clock), advancing that state in the same
   * statement. Deliveries are locked FOR UPDATE SKIP LOCKED. A delivery held back stays pending
   * and due: no attempt is used. `wakeAt` (the caller's clock) is when a rate-limited
   * subscription may start its next attempt.
   */
  async claim(now: number, limit: number, leaseUntil: number): Promise<ClaimResult> {
    if (!this.secrets) throw new Error('DeliveryStore needs a SecretBox to claim deliveries');
    type Row = {
      id: string;
      subscription_id: string;
      event_id: string;
      event_type: string;
      body: string | null;
      payload_text: string;
      attempt_count: number;
      manual: boolean;
      first_attempt_at: Date;
      prev_first_attempt_at: Date | null;
      prev_last_attempt_at: Date | null;
      created_at: Date;
      url: string;
      account_id: string;
      secret_ciphertext: string;
      previous_secret_ciphertext: string | null;
      trace_context: string | null;
    };
    const defaultRate = this.options.defaultRatePerSecond ?? null;
    const { rows, wakeAt, held } = await withTransaction(this.pool, async (client) => {
      const locked = await client.query<{ id: string; rate: number | null; tat: number | null; db_now: number }>(
        `WITH s AS (
           SELECT s.id, s.rate_limit_per_second, s.rate_tat FROM webhook.subscriptions s
            WHERE s.is_active AND (s.paused_until IS NULL OR s.paused_until <= $1)
              AND s.id IN (SELECT d.subscription_id FROM webhook.deliveries d WHERE d.status = 'pending' AND d.next_attempt_at <= $1)
            ORDER BY s.id
            FOR NO KEY UPDATE OF s)
         SELECT id, rate_limit_per_second AS rate, extract(epoch FROM rate_tat) * 1000 AS tat,
                extract(epoch FROM clock_timestamp()) * 1000 AS db_now
           FROM s`,
        [new Date(now)],
      );
      if (locked.rows.length === 0) return { rows: [] as Row[], wakeAt: null, held: { rate: 0, inFlight: 0 } };
      // The database clock after the last lock: the one clock every replica shares.
      const dbNow = Math.max(...locked.rows.map((r) => Number(r.db_now)));
      const plan = locked.rows.map((r) => {
        const rate = r.rate ?? defaultRate;
        if (rate === null) return { id: r.id, rate, allowed: limit, base: 0, step: 0, allowance: null };
        const allowance = rateAllowance(rate, r.tat === null ? null : Number(r.tat), dbNow);
        return { id: r.id, rate, allowed: allowance.allowed, base: allowance.base, step: allowance.intervalMs, allowance };
      });
      const result = await client.query<Row & { kind: 'd' | 'h' }>(
        `WITH lim AS (
           SELECT v.id, v.allowed, v.base, v.step,
                  -- Half-open (connection failures at the threshold): one delivery at a time.
                  CASE WHEN s.connection_failures >= $8 THEN 1 ELSE s.max_in_flight END
                    - (SELECT count(*) FROM webhook.deliveries l
                                      WHERE l.subscription_id = v.id AND l.status = 'pending' AND l.leased_until > $1)::int AS room
             FROM unnest($4::text[], $5::int[], $6::float8[], $7::float8[]) AS v(id, allowed, base, step)
             JOIN webhook.subscriptions s ON s.id = v.id AND s.is_active AND (s.paused_until IS NULL OR s.paused_until <= $1)),
         due AS (
           -- Round-robin across subscriptions: every subscription's earliest due delivery, then every one's
           -- second, and so on; a subscription with a deep backlog does not take every free slot.
           SELECT c.id, c.prev_first, c.prev_last
             FROM lim CROSS JOIN LATERAL (
                    SELECT d.id, d.first_attempt_at AS prev_first, d.last_attempt_at AS prev_last, d.next_attempt_at
                      FROM webhook.deliveries d
                     WHERE d.subscription_id = lim.id AND d.status = 'pending' AND d.next_attempt_at <= $1
                     ORDER BY d.next_attempt_at
                     LIMIT GREATEST(0, LEAST(lim.allowed, lim.room, $2))
                       FOR UPDATE OF d SKIP LOCKED) c
            ORDER BY row_number() OVER (PARTITION BY lim.id ORDER BY c.next_attempt_at), c.next_attempt_at
            LIMIT $2),
         claimed AS (
           UPDATE webhook.deliveries d
              SET attempt_count = d.attempt_count + 1, next_attempt_at = $3, leased_until = $3, updated_at = $1,
                  first_attempt_at = COALESCE(d.first_attempt_at, $1), last_attempt_at = $1
             FROM due
            WHERE d.id = due.id
           RETURNING d.id, d.subscription_id, d.event_id, d.event_type, d.body, d.payload, d.attempt_count, d.manual,
                     d.first_attempt_at, due.prev_first, due.prev_last, d.created_at, d.trace_context),
         paced AS (
           UPDATE webhook.subscriptions s SET rate_tat = to_timestamp((lim.base + n.k * lim.step) / 1000.0)
             FROM lim JOIN (SELECT subscription_id, count(*)::int AS k FROM claimed GROUP BY subscription_id) n ON n.subscription_id = lim.id
            WHERE s.id = lim.id AND lim.step > 0)
         SELECT 'd'::text AS kind, c.id, c.subscription_id, c.event_id, c.event_type, c.body, c.payload::text AS payload_text, c.attempt_count,
                c.manual, c.first_attempt_at, c.prev_first AS prev_first_attempt_at, c.prev_last AS prev_last_attempt_at,
                c.created_at, s.url, s.account_id, s.secret_ciphertext,
                CASE WHEN s.secret_rotation_ends_at > $1 THEN s.previous_secret_ciphertext END AS previous_secret_ciphertext,
                c.trace_context
           FROM claimed c JOIN webhook.subscriptions s ON s.id = c.subscription_id
         UNION ALL
         -- The subscriptions held back by max_in_flight (for the metrics; no per-subscription label).
         SELECT 'h', NULL, lim.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
           FROM lim WHERE lim.room <= 0`,
        [
          new Date(now),
          limit,
          new Date(leaseUntil),
          plan.map((p) => p.id),
          plan.map((p) => p.allowed),
          plan.map((p) => p.base),
          plan.map((p) => p.step),
          this.pauseOptions.threshold,
        ],
      );
      const claimedRows = { rows: result.rows.filter((r) => r.kind === 'd') };
      const held = {
        rate: plan.filter((p) => p.allowance !== null && p.allowed === 0).length,
        inFlight: result.rows.length - claimedRows.rows.length,
      };
      // When the earliest rate-limited subscription may start again, on the caller's clock.
      const taken = new Map<string, number>();
      for (const r of claimedRows.rows) taken.set(r.subscription_id, (taken.get(r.subscription_id) ?? 0) + 1);
      let wake: number | null = null;
      for (const p of plan) {
        if (p.allowance === null || p.rate === null) continue;
        const at = now + Math.max(0, nextStartAt(p.rate, p.allowance, taken.get(p.id) ?? 0) - dbNow);
        wake = wake === null ? at : Math.min(wake, at);
      }
      return { rows: claimedRows.rows, wakeAt: wake, held };
    });
    const secrets = this.secrets;
    const claimed: ClaimedDelivery[] = [];
    const unreadable = new Map<string, ClaimRef[]>();
    for (const r of rows) {
      const claim: ClaimRef = {
        id: r.id,
        attempt: r.attempt_count,
        previousFirstAttemptAt: r.prev_first_attempt_at,
        previousLastAttemptAt: r.prev_last_attempt_at,
      };
      let secret: string;
      let previous: string | undefined;
      try {
        secret = this.secretOf(secrets, r.secret_ciphertext, r.subscription_id);
        if (r.previous_secret_ciphertext) previous = this.secretOf(secrets, r.previous_secret_ciphertext, r.subscription_id);
      } catch {
        unreadable.set(r.subscription_id, [...(unreadable.get(r.subscription_id) ?? []), claim]);
        continue;
      }
      claimed.push({
        claim,
        id: r.id,
        subscriptionId: r.subscription_id,
        accountId: r.account_id,
        eventId: r.event_id,
        eventType: r.event_type,
        body: r.body ?? envelopeText(r.payload_text),
        attempt: r.attempt_count,
        manual: r.manual,
        firstAttemptAt: r.first_attempt_at.getTime(),
        createdAt: r.created_at.getTime(),
        url: r.url,
        secret,
        secrets: previous ? [secret, previous] : [secret],
        traceContext: r.trace_context,
      });
    }
    if (unreadable.size > 0) await this.deferUnreadable(now, unreadable);
    return { claimed, wakeAt, held };
  }

  /**
   * Puts back deliveries that cannot be signed: nothing was sent, so the
   * claim is undone (see `releaseClaims`) and they come due again after
   * SECRET_UNREADABLE_DEFER_MS. If even that fails, their leases end and the
   * next claim meets them again; the rest of the batch goes on either way.
   */
  private async deferUnreadable(now: number, unreadable: Map<string, ClaimRef[]>): Promise<void> {
    await this.releaseClaims([...unreadable.values()].flat(), now, now + SECRET_UNREADABLE_DEFER_MS).catch(() => 0);
    for (const [subscriptionId, claims] of unreadable) {
      this.hooks.onSecretUnreadable?.(
        subscriptionId,
        claims.map((c) => c.id),
      );
    }
  }

  /**
   * Undoes claims whose deliveries were not sent: the attempt number is given
   * back, first_attempt_at and last_attempt_at are restored to what they were
   * before the claim, and the delivery comes due at `dueAt`. Only a claim that
   * is still the latest one is undone (a delivery claimed again meanwhile, or
   * finished, is left alone). Returns how many were released.
   */
  async releaseClaims(claims: readonly ClaimRef[], now: number, dueAt: number): Promise<number> {
    if (claims.length === 0) return 0;
    const { rowCount } = await this.pool.query(
      `UPDATE webhook.deliveries d
          SET attempt_count = d.attempt_count - 1, next_attempt_at = $2, leased_until = NULL, updated_at = $1,
              first_attempt_at = v.prev_first, last_attempt_at = v.prev_last
         FROM unnest($3::text[], $4::int[], $5::timestamptz[], $6::timestamptz[]) AS v(id, attempt, prev_first, prev_last)
        WHERE d.id = v.id AND d.status = 'pending' AND d.attempt_count = v.attempt`,
      [
        new Date(now),
        new Date(dueAt),
        claims.map((c) => c.id),
        claims.map((c) => c.attempt),
        claims.map((c) => c.previousFirstAttemptAt),
        claims.map((c) => c.previousLastAttemptAt),
      ],
    );
    return rowCount ?? 0;
  }

  /**
   * The clear secret of a subscription, decrypted once per ciphertext and
   * reused for SECRET_CACHE_TTL_MS. Keyed on the ciphertext itself: rotating
   * the secret re-encrypts it (fresh IV), so the next claim after a rotation
   * decrypts the new secret; nothing stale is ever used.
   */
  private secretOf(secrets: SecretBox, ciphertext: string, subscriptionId: string): string {
    const key = `${subscriptionId}\0${ciphertext}`;
    const now = Date.now();
    const hit = this.secretCache.get(key);
    if (hit && hit.until > now) return hit.secret;
    const secret = secrets.decrypt(ciphertext, subscriptionId);
    if (this.secretCache.size >= SECRET_CACHE_MAX) this.secretCache.clear();
    this.secretCache.set(key, { secret, until: now + SECRET_CACHE_TTL_MS });
    return secret;
  }

  /**
   * Cancels due pending deliveries of inactive subscriptions (pending retries
   * stop when a subscription is deactivated). Returns how many.
   */
  async cancelInactiveDue(now: number): Promise<number> {
    const { rowCount } = await this.pool.query(
      `UPDATE webhook.deliveries d SET status = 'cancelled', next_attempt_at = NULL, updated_at = $1
         FROM webhook.subscriptions s
        WHERE s.id = d.subscription_id AND d.status = 'pending' AND d.next_attempt_at <= $1 AND NOT s.is_active`,
      [new Date(now)],
    );
    return rowCount ?? 0;
  }

  /** The earliest next_attempt_at of pending work (the worker sleeps until then); null when none. */
  async nextDueAt(): Promise<number | null> {
    const { rows } = await this.pool.query<{ at: Date | null }>(
      `SELECT min(next_attempt_at) AS at FROM webhook.deliveries WHERE status = 'pending'`,
    );
    return rows[0]?.at ? rows[0].at.getTime() : null;
  }

  /**
   * Records an attempt and applies the decision in one transaction (see
   * `recordAttempts`, of which this is the one-item case).
   */
  async recordAttempt(
    claimed: ClaimedDelivery,
    result: AttemptResult,
    decide: (input: DecisionInput) => AttemptDecision,
  ): Promise<RecordOutcome> {
    const [outcome] = await this.recordAttempts([{ claimed, result }], decide);
    return outcome as RecordOutcome;
  }

  /**
   * Records a batch of attempts and applies their decisions in one
   * transaction, with the same result as recording them one after the other
   * in the given order: the attempt rows, each delivery's status and next
   * time, the subscriptions' failure bookkeeping, and — when a decision says
   * so — the deactivation of a subscription with its pending deliveries
   * cancelled. Four round trips per batch (BEGIN, lock and read, write,
   * COMMIT; plus two per deactivation); the subscriptions and then the
   * deliveries are locked in id order, so concurrent batches (replicas) do not
   * deadlock.
   */
  async recordAttempts(items: readonly AttemptRecord[], decide: (input: DecisionInput) => AttemptDecision): Promise<RecordOutcome[]> {
    if (items.length === 0) return [];
    return withTransaction(this.pool, async (client) => {
      const subIds = [...new Set(items.map((i) => i.claimed.subscriptionId))];
      const deliveryIds = [...new Set(items.map((i) => i.claimed.id))];
      // One round trip: the subscriptions, then the deliveries, locked in id order. FOR NO KEY UPDATE
      // (what the UPDATEs take anyway) leaves the fan-out's foreign-key checks (KEY SHARE) unblocked.
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
      const subRows = { rows: locked.rows.filter((r) => r.kind === 's') };
      const deliveryRows = {
        rows: locked.rows
          .filter((r) => r.kind === 'd')
          .map((r) => ({
            id: r.id,
            subscription_id: r.subscription_id as string,
            status: r.status as string,
            attempt_count: r.attempt_count as number,
          })),
      };
      const subs = new Map(
        subRows.rows.map((r) => [
          r.id,
          {
            lastSuccessAt: r.last_success_at?.getTime() ?? null,
            isActive: r.is_active === true,
            touched: false,
            reset: false,
            failures: 0,
            successAt: null as number | null,
            failureAt: null as number | null,
            pause: {
              connectionFailures: r.connection_failures ?? 0,
              pausedUntil: r.paused_until?.getTime() ?? null,
              pauseReason: r.pause_reason,
            } as PauseState,
          },
        ]),
      );
      const deliveries = new Map(deliveryRows.rows.map((r) => [r.id, r]));

      // Attempt rows for the deliveries still there (locked now, so they stay).
      const attempts = items.filter((i) => deliveries.has(i.claimed.id));

      // The decisions, in order, on the state as it would be after the previous items.
      const outcomes: RecordOutcome[] = [];
      const updates: { id: string; status: string; next: string | null; at: string }[] = [];
      const deactivations: { subscriptionId: string; at: Date; outcome: RecordOutcome }[] = [];
      /** The pause each attempt started (by delivery id), recorded with its attempt row. */
      const pauses = new Map<string, { until: number; reason: PauseReason }>();
      for (const { claimed, result } of items) {
        const sub = subs.get(claimed.subscriptionId);
        const row = deliveries.get(claimed.id);
        const decision = decide({
          attempt: claimed.attempt,
          success: result.success,
          manual: claimed.manual,
          finishedAt: result.finishedAt,
          firstAttemptAt: claimed.firstAttemptAt,
          lastSuccessAt: sub?.lastSuccessAt ?? null,
          retryAfterMs: result.retryAfterMs ?? null,
          permanent: result.permanent ?? false,
        });
        if (!sub || !row || row.status !== 'pending' || row.attempt_count !== claimed.attempt) {
          outcomes.push({ decision, applied: false, deactivated: false, cancelled: 0 });
          continue;
        }
        row.status = decision.status;
        const finished = new Date(result.finishedAt).toISOString();
        updates.push({
          id: claimed.id,
          status: decision.status,
          next: decision.status === 'pending' ? new Date(decision.nextAttemptAt).toISOString() : null,
          at: finished,
        });
        sub.touched = true;
        if (result.success) {
          sub.reset = true;
          sub.failures = 0;
          sub.lastSuccessAt = Math.max(sub.lastSuccessAt ?? result.startedAt, result.startedAt);
          sub.successAt = Math.max(sub.successAt ?? result.startedAt, result.startedAt);
        } else {
          sub.failures += 1;
          sub.failureAt = result.finishedAt;
        }
        const backoff = pauseAfterAttempt(
          sub.pause,
          {
            finishedAt: result.finishedAt,
            success: result.success,
            responseStatus: result.responseStatus,
            retryAfterMs: result.retryAfterMs ?? null,
            connectionFailure: result.connectionFailure ?? false,
          },
          this.pauseOptions,
        );
        sub.pause = backoff.state;
        if (backoff.pause) pauses.set(claimed.id, backoff.pause);
        const outcome: RecordOutcome = { decision, applied: true, deactivated: false, cancelled: 0, paused: backoff.pause };
        outcomes.push(outcome);
        if (decision.status === 'failed' && decision.deactivate && sub.isActive) {
          sub.isActive = false;
          outcome.deactivated = true;
          deactivations.push({ subscriptionId: claimed.subscriptionId, at: new Date(result.finishedAt), outcome });
          // Its pending deliveries are cancelled: later items of this batch find them so.
          for (const d of deliveries.values()) {
            if (d.subscription_id === claimed.subscriptionId && d.status === 'pending') d.status = 'cancelled';
          }
        }
      }

      // One round trip for every write: the attempt rows, the deliveries, the subscriptions' bookkeeping.
      const touched = [...subs.entries()].filter(([, s]) => s.touched);
      const isoAt = (t: number | null) => (t === null ? null : new Date(t).toISOString());
      await client.query(
        `WITH attempts AS (
           INSERT INTO webhook.delivery_attempts (delivery_id, attempt, started_at, duration_ms, response_status, error, outcome,
                                                  request_headers, response_headers, response_headers_truncated, response_body,
                                                  response_body_truncated, dns_ms, connect_ms, tls_ms, first_byte_ms, connection_reused,
                                                  paused_until, pause_reason)
           SELECT a.id, a.attempt, a.started_at, a.duration_ms, a.response_status, a.error, a.outcome,
                  a.debug->'request_headers', NULLIF(a.debug->'response_headers', 'null'::jsonb),
                  COALESCE((a.debug->>'response_headers_truncated')::boolean, false), a.debug->>'response_body',
                  COALESCE((a.debug->>'response_body_truncated')::boolean, false), (a.debug->>'dns_ms')::float8,
                  (a.debug->>'connect_ms')::float8, (a.debug->>'tls_ms')::float8, (a.debug->>'first_byte_ms')::float8,
                  (a.debug->>'connection_reused')::boolean, a.paused_until, a.pause_reason
             FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::int[], $5::int[], $6::text[], $7::text[], $17::jsonb[],
                         $18::timestamptz[], $19::text[])
                  AS a(id, attempt, started_at, duration_ms, response_status, error, outcome, debug, paused_until, pause_reason)
           ON CONFLICT (delivery_id, attempt) DO NOTHING),
         deliveries AS (
           UPDATE webhook.deliveries d SET status = u.status, next_attempt_at = u.next_at, leased_until = NULL, manual = false, updated_at = u.at
             FROM unnest($8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[]) AS u(id, status, next_at, at)
            WHERE d.id = u.id)
         UPDATE webhook.subscriptions s
            SET consecutive_failures = CASE WHEN u.reset THEN u.failures ELSE s.consecutive_failures + u.failures END,
                last_success_at = GREATEST(s.last_success_at, u.success_at),
                last_failure_at = COALESCE(u.failure_at, s.last_failure_at),
                paused_until = u.paused_until, pause_reason = u.pause_reason, connection_failures = u.connection_failures
           FROM unnest($12::text[], $13::bool[], $14::int[], $15::timestamptz[], $16::timestamptz[], $20::timestamptz[], $21::text[], $22::int[])
                AS u(id, reset, failures, success_at, failure_at, paused_until, pause_reason, connection_failures)
          WHERE s.id = u.id`,
        [
          attempts.map((i) => i.claimed.id),
          attempts.map((i) => i.claimed.attempt),
          attempts.map((i) => isoAt(i.result.startedAt)),
          attempts.map((i) => Math.round(i.result.durationMs)),
          attempts.map((i) => i.result.responseStatus),
          attempts.map((i) => i.result.error?.slice(0, 500) ?? null),
          attempts.map((i) => (i.result.success ? 'success' : 'failure')),
          updates.map((u) => u.id),
          updates.map((u) => u.status),
          updates.map((u) => u.next),
          updates.map((u) => u.at),
          touched.map(([id]) => id),
          touched.map(([, s]) => s.reset),
          touched.map(([, s]) => s.failures),
          touched.map(([, s]) => isoAt(s.successAt)),
          touched.map(([, s]) => isoAt(s.failureAt)),
          attempts.map((i) => debugColumns(i.result.debug)),
          attempts.map((i) => isoAt(pauses.get(i.claimed.id)?.until ?? null)),
          attempts.map((i) => pauses.get(i.claimed.id)?.reason ?? null),
          touched.map(([, s]) => isoAt(s.pause.pausedUntil)),
          touched.map(([, s]) => s.pause.pauseReason),
          touched.map(([, s]) => s.pause.connectionFailures),
        ],
      );
      for (const d of deactivations) {
        await client.query(
          `UPDATE webhook.subscriptions SET is_active = false, deactivated_at = $2, deactivation_reason = $3, updated_at = $2
            WHERE id = $1 AND is_active`,
          [d.subscriptionId, d.at, DEACTIVATION_CONSECUTIVE_FAILURES],
        );
        const c = await client.query(
          `UPDATE webhook.deliveries SET status = 'cancelled', next_attempt_at = NULL, updated_at = $2
            WHERE subscription_id = $1 AND status = 'pending'`,
          [d.subscriptionId, d.at],
        );
        d.outcome.cancelled = c.rowCount ?? 0;
      }
      return outcomes;
    });
  }

  // -------------------------------------------------------------------------
  // Webhook API (the caller has checked that the subscription belongs to the account)

  /** Newest first, each with every attempt; `after` continues after the last row of the previous page. */
  async list(subscriptionId: string, limit: number, after?: DeliveryPosition): Promise<{ items: DeliveryView[]; has_more: boolean }> {
    const params: unknown[] = [subscriptionId, limit + 1];
    let where = 'subscription_id = $1';
    if (after) {
      params.push(new Date(after.created_at), after.id);
      where += ' AND (created_at, id) < ($3, $4)';
    }
    const { rows } = await this.pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook.deliveries WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $2`,
      params,
    );
    const page = rows.slice(0, limit);
    const attempts = await this.attemptsOf(page.map((r) => r.id));
    return { items: page.map((r) => toView(r, attempts.get(r.id) ?? [])), has_more: rows.length > limit };
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

  /** A manual delivery of a given event (the `webhook.test` event), due now. */
  async createManual(input: { id: string; subscriptionId: string; eventId: string; eventType: string; body: string; now: number }) {
    const at = new Date(input.now);
    await this.pool.query(
      `INSERT INTO webhook.deliveries (id, subscription_id, event_id, event_type, payload, body, status, manual, attempt_count, next_attempt_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, $7::text, 'pending', true, 0, $6, $6, $6)`,
      // The body is its own text parameter: one parameter used as jsonb too would be typed jsonb,
      // and the stored body (what is signed and sent) would come back with jsonb's key order.
      [input.id, input.subscriptionId, input.eventId, input.eventType, input.body, at, input.body],
    );
    return this.get(input.subscriptionId, input.id) as Promise<DeliveryView>;
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
