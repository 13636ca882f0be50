import { isEventType } from '@fcd/events';
import { type KeysetPage, keysetPage, type PageRequest, type Pool, type PoolClient, UUID_LOWER_CASE } from '@fcd/service-kit';
import { EVENT_FIELDS, type EventFilter, type LoggedEvent, type StoredEvent } from './event-record';
import { columnsOf, recordOf } from './fields';
import { facetsOfBody } from './filter';
import { selectKeysetPage } from './keyset-select';
import { BY_POSITION, EVENT_LIST } from './lists';
import { facetParameters, subscriptionMatchesSql } from './match-sql';
import { type RecoveryRequest, type RecoveryResult, recoverEvents } from './recovery';

/**
 * The durable event log (table `webhook.events`, docs/adr/0002-event-log-in-postgres.md): every
 * event of the four public types the dispatcher consumes, kept EVENT_RETENTION_DAYS. It feeds the
 * events API (GET /v1/events, oldest first by `position`) and recovery (POST
 * /v1/webhooks/{id}/recover). All its SQL is here; times are epoch ms from the caller's clock.
 */

/**
 * The events list's condition for `subscriptionId`: the fan-out's rule (match-sql.ts) over the
 * logged row `t` and its facets, the subscription read by its key. Inside CASE, so the planner
 * takes it as one opaque condition (half the rows) and reads the log in position order until the
 * page is full; given the rule's parts, it multiplies their default selectivities, expects a handful
 * of rows, and reads and sorts the whole log instead (65 ms against 0.3 ms on 200,000 events). A
 * subscription that matches few events still reads the log until it finds a page of them.
 */
const SUBSCRIPTION_MATCHES = `EXISTS (SELECT 1 FROM webhook.subscriptions s
  WHERE s.id = $? AND CASE WHEN ${subscriptionMatchesSql('s', 't')} THEN true ELSE false END)`;

/** Taken around every append: positions are assigned in commit order (see `appendCtes`). */
const APPEND_LOCK = 'webhook.events:append';

/**
 * The append of `events` as two CTEs of one statement, its parameters numbered from `first`:
 * `append_lock` takes a transaction-scoped advisory lock, and `appended` inserts the rows of the
 * public event types (RETURNING 1 per row added) in the given order, idempotently on the event id,
 * once the lock is held (every row it inserts is joined with the lock's row, and sorted before the
 * insert). The lock is held until the transaction ends — the statement's own, when it runs alone —
 * so positions are assigned in commit order: a reader that has seen position p and asks for
 * `position > p` never misses a row that commits later. Undefined when no event is to be logged.
 */
export function appendCtes(events: readonly LoggedEvent[], now: number, first: number): { ctes: string; params: unknown[] } | undefined {
  const seen = new Set<string>();
  const rows = events.filter((e) => isEventType(e.type) && !seen.has(e.id) && seen.add(e.id));
  if (rows.length === 0) return undefined;
  const $ = (i: number) => `$${first + i}`;
  const facets = facetParameters(rows.map((e) => e.facets ?? facetsOfBody(e.body)));
  const ctes = `append_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext(${$(0)}))),
   appended AS (
     INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at, states, programs, severities, epa_regions)
     SELECT e.id, e.type, e.created_at, e.facility_ids::uuid[], e.body, ${$(6)}, e.states::text[], e.programs::text[],
            e.severities::text[], e.epa_regions::text[]
       FROM unnest(${$(1)}::text[], ${$(2)}::text[], ${$(3)}::timestamptz[], ${$(4)}::text[], ${$(5)}::text[], ${$(7)}::text[],
                   ${$(8)}::text[], ${$(9)}::text[], ${$(10)}::text[])
            WITH ORDINALITY AS e(id, type, created_at, facility_ids, body, states, programs, severities, epa_regions, n)
            CROSS JOIN append_lock
      ORDER BY e.n
     ON CONFLICT (id) DO NOTHING
     RETURNING 1)`;
  const params = [
    APPEND_LOCK,
    rows.map((e) => e.id),
    rows.map((e) => e.type),
    rows.map((e) => new Date(e.createdAt).toISOString()),
    // Lower-case UUIDs only, so the array literal needs no quoting.
    rows.map(
      (e) =>
        `{${e.facilityIds
          .map((f) => f.toLowerCase())
          .filter((f) => UUID_LOWER_CASE.test(f))
          .join(',')}}`,
    ),
    rows.map((e) => e.body),
    new Date(now),
    facets.states,
    facets.programs,
    facets.severities,
    facets.epaRegions,
  ];
  return { ctes, params };
}

export class EventLog {
  constructor(private readonly pool: Pool) {}

  /**
   * Appends events in the caller's transaction, in the given order, idempotently on the event id
   * (a redelivered event is not logged twice), in one statement (`appendCtes`). Only the public
   * event types are logged. Returns how many rows were added.
   */
  static async append(client: PoolClient, events: readonly LoggedEvent[], now: number): Promise<number> {
    const append = appendCtes(events, now, 1);
    if (!append) return 0;
    const { rows } = await client.query<{ n: number }>(`WITH ${append.ctes} SELECT count(*)::int AS n FROM appended`, append.params);
    return rows[0]?.n ?? 0;
  }

  /** Oldest first (by position), after `after` (a position) when given; one more than `limit` tells whether more follow. */
  list(filter: EventFilter, limit: number, after?: string): Promise<{ items: StoredEvent[]; has_more: boolean }> {
    const where: Array<[string, unknown]> = [];
    if (filter.type !== undefined) where.push(['type = $?', filter.type]);
    if (filter.facilityId !== undefined) where.push(['facility_ids @> ARRAY[$?::uuid]', filter.facilityId.toLowerCase()]);
    if (filter.since !== undefined) where.push(['created_at >= $?', new Date(filter.since)]);
    if (filter.subscriptionId !== undefined) where.push([SUBSCRIPTION_MATCHES, filter.subscriptionId]);
    return selectKeysetPage<StoredEvent>(
      this.pool,
      { table: 'webhook.events', fields: EVENT_FIELDS, order: BY_POSITION, where, after: [after ?? '0'] },
      limit,
    );
  }

  /** A page of the log for a request's limit and cursor (polled: see `EVENT_LIST`); 400 VALIDATION_ERROR for a bad one. */
  page(filter: EventFilter, request: PageRequest): Promise<KeysetPage<StoredEvent>> {
    return keysetPage<string, StoredEvent>(EVENT_LIST, request, (limit, after) => this.list(filter, limit, after));
  }

  async get(id: string): Promise<StoredEvent | undefined> {
    const { rows } = await this.pool.query<Record<string, unknown>>(`SELECT ${columnsOf(EVENT_FIELDS)} FROM webhook.events WHERE id = $1`, [
      id,
    ]);
    return rows[0] && recordOf<StoredEvent>(EVENT_FIELDS, rows[0]);
  }

  /**
   * Deletes events created before `before`, `batch` rows per statement (short statements, no long
   * lock on the table), until none is left. Returns how many were deleted.
   */
  async prune(before: number, batch = 5000): Promise<number> {
    let total = 0;
    for (;;) {
      const { rowCount } = await this.pool.query(
        `DELETE FROM webhook.events WHERE position IN (
           SELECT position FROM webhook.events WHERE created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [new Date(before), batch],
      );
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < batch) return total;
    }
  }

  /** A bounded, paced recovery of one subscription's missed events (recovery.ts, `recoverEvents`). */
  recover(r: RecoveryRequest): Promise<RecoveryResult> {
    return recoverEvents(this.pool, r);
  }
}
