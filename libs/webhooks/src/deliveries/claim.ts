import { type Pool, withTransactionFrom } from '@fcd/service-kit';
import { nextStartAt, type RateAllowance, rateAllowance, startDeadline } from '../limits';
import { envelopeText } from './envelope';
import type { SecretDecrypter } from './secret-cache';
import type { ClaimedDelivery, ClaimRef } from './types';

/**
 * The claim of due deliveries (`DispatchQueue.claim`): the SQL that locks the
 * subscriptions with due work, takes what their limits allow and leases it,
 * and the decryption of the claimed rows' signing secrets.
 */

/** A claimed delivery as the claim statement returns it. */
export interface ClaimRow {
  id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  body: string | null;
  /** Rows from before migration 0003 only (no body). */
  payload_text: string | null;
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
}

export interface ClaimLimits {
  limit: number;
  /** The rate of subscriptions without their own; null: none. */
  defaultRate: number | null;
  /** Connection failures in a row at which a subscription is half-open (one delivery at a time). */
  breakerThreshold: number;
  /**
   * Leased deliveries of the caller whose request succeeded and which only wait for their attempt
   * to be recorded: no longer in flight at the receiver, so they do not count against
   * `max_in_flight`.
   */
  answered: readonly string[];
}

interface PlanItem {
  id: string;
  rate: number | null;
  allowed: number;
  base: number;
  step: number;
  allowance: RateAllowance | null;
}

/**
 * The subscriptions with pending deliveries, each with its earliest next_attempt_at (`due`): a
 * recursive skip scan of `deliveries_due_subscription`, one index probe per such subscription, so
 * its cost follows the number of subscriptions with work, not the deliveries waiting (a join or a
 * semi-join on the due deliveries read every row of a backlog, and stale statistics during a burst
 * made the planner choose that). A CTE to start a `WITH RECURSIVE` with.
 */
export const PENDING_SUBSCRIPTIONS_CTE = `pending AS (
       (SELECT d.subscription_id AS id, d.next_attempt_at AS due FROM webhook.deliveries d
         WHERE d.status = 'pending' ORDER BY d.subscription_id, d.next_attempt_at LIMIT 1)
       UNION ALL
       SELECT n.id, n.due FROM pending p CROSS JOIN LATERAL (
         SELECT d.subscription_id AS id, d.next_attempt_at AS due FROM webhook.deliveries d
          WHERE d.status = 'pending' AND d.subscription_id > p.id ORDER BY d.subscription_id, d.next_attempt_at LIMIT 1) n)`;

/** What `claimRows` found: the claimed rows, when to claim again, what was held back and the start bounds. */
interface ClaimOutcome {
  rows: ClaimRow[];
  wakeAt: number | null;
  held: { rate: number; inFlight: number };
  startBy: Map<string, number>;
}

/** A subscription `lockDue` locked: its pacing state, and the database clock. */
interface LockedRow {
  id: string;
  rate: number | null;
  tat: number | null;
  db_now: number;
}

/**
 * Locks the active, unpaused subscriptions with due work (in id order); their pacing state and the
 * database clock. Without parameters (sent with the BEGIN): `now` is inlined as an ISO timestamp.
 */
function lockDue(now: number): string {
  const at = `'${new Date(now).toISOString()}'::timestamptz`;
  return `WITH RECURSIVE ${PENDING_SUBSCRIPTIONS_CTE},
     locked AS (
       SELECT s.id, s.rate_limit_per_second, s.rate_tat FROM webhook.subscriptions s JOIN pending p ON p.id = s.id
        WHERE p.due <= ${at} AND s.is_active AND (s.paused_until IS NULL OR s.paused_until <= ${at})
        ORDER BY s.id
        FOR NO KEY UPDATE OF s)
     SELECT id, rate_limit_per_second AS rate, extract(epoch FROM rate_tat) * 1000 AS tat,
            extract(epoch FROM clock_timestamp()) * 1000 AS db_now
       FROM locked`;
}

const CLAIM_SQL = `WITH lim AS (
   SELECT v.id, v.allowed, v.base, v.step,
          -- Half-open (connection failures at the threshold): one delivery at a time.
          CASE WHEN s.connection_failures >= $8 THEN 1 ELSE s.max_in_flight END
            - (SELECT count(*) FROM webhook.deliveries l
                              WHERE l.subscription_id = v.id AND l.status = 'pending' AND l.leased_until > $1
                                AND l.id <> ALL ($9::text[]))::int AS room
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
 SELECT 'd'::text AS kind, c.id, c.subscription_id, c.event_id, c.event_type, c.body,
        CASE WHEN c.body IS NULL THEN c.payload::text END AS payload_text, c.attempt_count,
        c.manual, c.first_attempt_at, c.prev_first AS prev_first_attempt_at, c.prev_last AS prev_last_attempt_at,
        c.created_at, s.url, s.account_id, s.secret_ciphertext,
        CASE WHEN s.secret_rotation_ends_at > $1 THEN s.previous_secret_ciphertext END AS previous_secret_ciphertext,
        c.trace_context
   FROM claimed c JOIN webhook.subscriptions s ON s.id = c.subscription_id
 UNION ALL
 -- The subscriptions held back by max_in_flight (for the metrics; no per-subscription label).
 SELECT 'h', NULL, lim.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
   FROM lim WHERE lim.room <= 0`;

/** When the earliest rate-limited subscription may start again, on the caller's clock (null: none rate-limited). */
function wakeAt(plan: readonly PlanItem[], claimed: readonly ClaimRow[], now: number, dbNow: number): number | null {
  const taken = new Map<string, number>();
  for (const r of claimed) taken.set(r.subscription_id, (taken.get(r.subscription_id) ?? 0) + 1);
  let wake: number | null = null;
  for (const p of plan) {
    if (p.allowance === null || p.rate === null) continue;
    const at = now + Math.max(0, nextStartAt(p.rate, p.allowance, taken.get(p.id) ?? 0) - dbNow);
    wake = wake === null ? at : Math.min(wake, at);
  }
  return wake;
}

/**
 * Claims and leases due deliveries in one transaction (see `DispatchQueue.claim`). `clock` is the
 * caller's, read once a client is held, just before the transaction's first statement (which reads
 * the database clock) is sent: the start deadlines of the rate-limited subscriptions' deliveries
 * (`startBy`, by subscription id) count from then, an upper bound of the time since their starts
 * were admitted.
 */
export function claimRows(pool: Pool, now: number, leaseUntil: number, limits: ClaimLimits, clock: () => number): Promise<ClaimOutcome> {
  let issuedAt = 0;
  // The lock goes out with the BEGIN: one round trip fewer for every claim.
  const first = () => {
    issuedAt = clock();
    return lockDue(now);
  };
  return withTransactionFrom<LockedRow, ClaimOutcome>(pool, first, async (client, locked) => {
    const startBy = new Map<string, number>();
    if (locked.length === 0) return { rows: [] as ClaimRow[], wakeAt: null, held: { rate: 0, inFlight: 0 }, startBy };
    // The database clock after the last lock: the one clock every replica shares.
    const dbNow = Math.max(...locked.map((r) => Number(r.db_now)));
    const plan: PlanItem[] = locked.map((r) => {
      const rate = r.rate ?? limits.defaultRate;
      if (rate === null) return { id: r.id, rate, allowed: limits.limit, base: 0, step: 0, allowance: null };
      const allowance = rateAllowance(rate, r.tat === null ? null : Number(r.tat), dbNow);
      startBy.set(r.id, startDeadline(rate, issuedAt));
      return { id: r.id, rate, allowed: allowance.allowed, base: allowance.base, step: allowance.intervalMs, allowance };
    });
    const result = await client.query<ClaimRow & { kind: 'd' | 'h' }>(CLAIM_SQL, [
      new Date(now),
      limits.limit,
      new Date(leaseUntil),
      plan.map((p) => p.id),
      plan.map((p) => p.allowed),
      plan.map((p) => p.base),
      plan.map((p) => p.step),
      limits.breakerThreshold,
      limits.answered,
    ]);
    const rows = result.rows.filter((r) => r.kind === 'd');
    const held = {
      rate: plan.filter((p) => p.allowance !== null && p.allowed === 0).length,
      inFlight: result.rows.length - rows.length,
    };
    return { rows, wakeAt: wakeAt(plan, rows, now, dbNow), held, startBy };
  });
}

/**
 * The claimed deliveries with their clear secrets and start deadlines (`startBy`, by subscription
 * id; none: no rate limit); the claims of rows whose secret did not decrypt are returned apart,
 * by subscription.
 */
export function withSecrets(rows: readonly ClaimRow[], secrets: SecretDecrypter, startBy: ReadonlyMap<string, number>) {
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
      secret = secrets.decrypt(r.secret_ciphertext, r.subscription_id);
      if (r.previous_secret_ciphertext) previous = secrets.decrypt(r.previous_secret_ciphertext, r.subscription_id);
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
      // Every row has its body, or (from before migration 0003) its payload.
      body: r.body ?? envelopeText(r.payload_text as string),
      attempt: r.attempt_count,
      manual: r.manual,
      firstAttemptAt: r.first_attempt_at.getTime(),
      createdAt: r.created_at.getTime(),
      url: r.url,
      secret,
      secrets: previous ? [secret, previous] : [secret],
      traceContext: r.trace_context,
      startBy: startBy.get(r.subscription_id) ?? null,
    });
  }
  return { claimed, unreadable };
}
