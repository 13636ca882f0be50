import { setTimeout as sleep } from 'node:timers/promises';
import { type Pool, type PoolClient, withTransaction } from '@fcd/service-kit';
import { subscriptionMatchesSql } from './match-sql';

/**
 * The SQL of a recovery (POST /v1/webhooks/{id}/recover, docs/webhooks.md "Recovery"): bounded
 * (from the subscription's creation on, at most `maxEvents` per call, one in progress per
 * subscription) and paced (the recovered deliveries are due one after the other at the
 * subscription's rate), so a recovery cannot be turned into a flood of its receiver.
 *
 * Every statement is a plain index range: the events of the window by `events_type_created`
 * in (created_at, position) order (and the subscription's row by its key), then, for one page of them, the subscription's deliveries of
 * those events by the two partial indexes on (subscription_id, event_id) (`deliveries_fan_out_once`
 * and `deliveries_recovered`). No join whose plan depends on the tables' statistics.
 */

/** Most events one recovery enqueues; the rest is for the next call, from `nextSince`. */
export const RECOVERY_MAX_EVENTS = 10_000;
/** The pace of recovered deliveries for a subscription without `rate_limit_per_second`. */
export const DEFAULT_RECOVERY_PACE_PER_SECOND = 10;
/** Events a recovery reads per statement. */
const RECOVERY_PAGE = 500;
/** Most a recovery rests between pages: as long as the page took, so it uses at most half a CPU of the database and of the service. */
const MAX_PAGE_REST_MS = 100;

export interface RecoveryRequest {
  subscriptionId: string;
  /** The window [since, until) on the events' created_at, epoch ms; `since` is raised to the subscription's created_at. */
  since: number;
  until: number;
  dryRun: boolean;
  now: number;
  /** RECOVERY_MAX_EVENTS unless set (tests). */
  maxEvents?: number;
  /** Deliveries per second for a subscription without its own rate; DEFAULT_RECOVERY_PACE_PER_SECOND unless set. */
  defaultPacePerSecond?: number;
}

export type RecoveryResult =
  /** `since`: the window's start as applied; `nextSince`: where the next call starts (null: the window is done). */
  | { status: 'done'; events: number; since: number; nextSince: number | null }
  | { status: 'not_found' }
  | { status: 'inactive' }
  /** Another recovery of the subscription holds its lock right now. */
  | { status: 'busy' }
  /** Deliveries of an earlier recovery are still pending; the last is due at `lastDueAt` (epoch ms). */
  | { status: 'in_progress'; lastDueAt: number };

interface SubscriptionRow {
  events: string[];
  facility_ids: string[] | null;
  is_active: boolean;
  created_ms: number;
  rate: number | null;
}

interface EventRow {
  position: string;
  id: string;
  type: string;
  body: string;
  created_ms: number;
  /** created_at as Postgres prints it: the keyset, exact to the microsecond. */
  created_key: string;
  /** Whether the subscription matches it (`subscriptionMatchesSql`). */
  matched: boolean;
}

/**
 * One page of the window after the keyset (created_at, position), in that order: per event type of
 * the subscription, a range of `events_type_created` (equality on type, then created_at from the
 * keyset's, in index order, so the LIMIT stops the scan; the row comparison form of the keyset let
 * the planner prefer a bitmap and a sort of the whole window on unanalysed tables), narrowed to the
 * subscription's facilities when it has some (so the GIN index may serve), merged. Each row says
 * whether the subscription matches it by the fan-out's own rule (`subscriptionMatchesSql`, over the
 * subscription's row and the facets the log keeps): evaluated on the page, after the scan, so the
 * rule's conditions do not change how the window is read.
 */
const PAGE_SQL = `SELECT x.position::text AS position, x.id, x.type, x.body, extract(epoch FROM x.created_at) * 1000 AS created_ms,
         x.created_at::text AS created_key, ${subscriptionMatchesSql('s', 'x')} AS matched
    FROM (SELECT y.* FROM unnest($4::text[]) AS t(type) CROSS JOIN LATERAL (
            SELECT e.position, e.id, e.type, e.body, e.created_at, e.facility_ids, e.states, e.programs, e.severities, e.epa_regions
              FROM webhook.events e
             WHERE e.type = t.type AND e.created_at >= $1::timestamptz AND e.created_at < $3
               AND (e.created_at > $1::timestamptz OR e.position > $2::bigint)
               AND ($5::uuid[] IS NULL OR e.facility_ids && $5::uuid[])
             ORDER BY e.created_at, e.position
             LIMIT $7) y
           ORDER BY y.created_at, y.position
           LIMIT $7) x
    JOIN webhook.subscriptions s ON s.id = $6
   ORDER BY x.created_at, x.position`;

/** Of these events, those the subscription received or has on their way (succeeded or pending). */
const RECEIVED_SQL = `SELECT d.event_id FROM webhook.deliveries d
   WHERE d.subscription_id = $1 AND d.event_id = ANY($2::text[]) AND NOT d.recovery AND d.status IN ('succeeded', 'pending')
  UNION ALL
  SELECT d.event_id FROM webhook.deliveries d
   WHERE d.subscription_id = $1 AND d.event_id = ANY($2::text[]) AND d.recovery AND d.status IN ('succeeded', 'pending')`;

/** The statements a recovery page runs, for EXPLAIN in tests. */
export const RECOVERY_STATEMENTS = { page: PAGE_SQL, received: RECEIVED_SQL } as const;

/** The spacing of recovered deliveries, ms: one per 1 / pace seconds. */
export function recoveryIntervalMs(rate: number | null, defaultPacePerSecond = DEFAULT_RECOVERY_PACE_PER_SECOND): number {
  return 1000 / (rate ?? defaultPacePerSecond);
}

async function lockedSubscription(client: PoolClient, id: string): Promise<SubscriptionRow | undefined> {
  // FOR KEY SHARE: a concurrent delete waits for the deliveries written here (and takes them with
  // it) instead of failing their foreign key.
  const { rows } = await client.query<SubscriptionRow>(
    `SELECT events, facility_ids::text[] AS facility_ids, is_active, extract(epoch FROM created_at) * 1000 AS created_ms,
            rate_limit_per_second AS rate
       FROM webhook.subscriptions WHERE id = $1 FOR KEY SHARE`,
    [id],
  );
  const row = rows[0];
  return row ? { ...row, created_ms: Number(row.created_ms) } : undefined;
}

/** When the last pending delivery of an earlier recovery is due (epoch ms), or null when none is pending. */
async function pendingRecoveryEnd(client: PoolClient, id: string): Promise<number | null> {
  const { rows } = await client.query<{ last: number | null }>(
    `SELECT extract(epoch FROM max(next_attempt_at)) * 1000 AS last FROM webhook.deliveries
      WHERE subscription_id = $1 AND status = 'pending' AND recovery`,
    [id],
  );
  const last = rows[0]?.last;
  return last === null || last === undefined ? null : Number(last);
}

/** The next page's events that the subscription matches and did not receive, in window order. */
async function missedPage(client: PoolClient, r: RecoveryRequest, sub: SubscriptionRow, after: EventRow | null, since: number) {
  const page = await client.query<EventRow>(PAGE_SQL, [
    after ? after.created_key : new Date(since),
    after ? after.position : '0',
    new Date(r.until),
    sub.events,
    sub.facility_ids,
    r.subscriptionId,
    RECOVERY_PAGE,
  ]);
  if (page.rows.length === 0) return { missed: [] as EventRow[], last: null, full: false };
  const received = await client.query<{ event_id: string }>(RECEIVED_SQL, [r.subscriptionId, page.rows.map((e) => e.id)]);
  const skip = new Set(received.rows.map((d) => d.event_id));
  const missed = page.rows.filter((e) => e.matched && !skip.has(e.id));
  return { missed, last: page.rows[page.rows.length - 1] ?? null, full: page.rows.length === RECOVERY_PAGE };
}

/** Inserts recovered deliveries, the n-th (from 0, counted over the whole recovery) due at start + n × interval. */
async function enqueue(client: PoolClient, subscriptionId: string, events: EventRow[], first: number, start: number, intervalMs: number) {
  await client.query(
    `INSERT INTO webhook.deliveries (id, subscription_id, event_id, event_type, body, status, attempt_count,
                                     next_attempt_at, created_at, updated_at, recovery)
     SELECT 'dlv_' || gen_random_uuid(), $1, v.event_id, v.type, v.body, 'pending', 0,
            $2::timestamptz + (($6::int + v.n - 1) * $7::float8) * interval '1 millisecond', $2, $2, true
       FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS v(event_id, type, body, n)`,
    [subscriptionId, new Date(start), events.map((e) => e.id), events.map((e) => e.type), events.map((e) => e.body), first, intervalMs],
  );
}

/**
 * Enqueues, as new deliveries, the logged events of [max(since, created_at), until) that the
 * subscription matches (`subscriptionMatchesSql`, the fan-out's rule) and has not
 * received (no delivery of it succeeded, none is pending), oldest first, at most `maxEvents`.
 * They are ordinary deliveries (automatic retries, deactivation), due one every
 * `recoveryIntervalMs` from now, so they take their turn behind live events instead of all at
 * once. One transaction under a per-subscription advisory lock taken with
 * `pg_try_advisory_xact_lock`: a second recovery at the same time never waits on a connection,
 * it is `busy`; one while recovered deliveries are still pending is `in_progress`. A dry run
 * counts the same events (up to the cap) and writes nothing.
 */
export async function recoverEvents(pool: Pool, r: RecoveryRequest): Promise<RecoveryResult> {
  const cap = r.maxEvents ?? RECOVERY_MAX_EVENTS;
  return withTransaction(pool, async (client) => {
    const lock = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [
      `webhook.recover:${r.subscriptionId}`,
    ]);
    if (!lock.rows[0]?.ok) return { status: 'busy' };
    const sub = await lockedSubscription(client, r.subscriptionId);
    if (!sub) return { status: 'not_found' };
    if (!sub.is_active) return { status: 'inactive' };
    if (!r.dryRun) {
      const lastDueAt = await pendingRecoveryEnd(client, r.subscriptionId);
      if (lastDueAt !== null) return { status: 'in_progress', lastDueAt };
    }
    const since = Math.min(Math.max(r.since, sub.created_ms), r.until);
    const interval = recoveryIntervalMs(sub.rate, r.defaultPacePerSecond);
    let count = 0;
    let after: EventRow | null = null;
    for (;;) {
      const started = Date.now();
      const page = await missedPage(client, r, sub, after, since);
      const take = page.missed.slice(0, cap - count);
      if (!r.dryRun && take.length > 0) await enqueue(client, r.subscriptionId, take, count, r.now, interval);
      count += take.length;
      const rest = page.missed[take.length];
      if (rest) return { status: 'done', events: count, since, nextSince: Number(rest.created_ms) };
      if (!page.full || !page.last) return { status: 'done', events: count, since, nextSince: null };
      after = page.last;
      // Leave the CPU to other requests for as long as this page took.
      await sleep(Math.min(MAX_PAGE_REST_MS, Date.now() - started));
    }
  });
}
