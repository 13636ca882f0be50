import { isEventType } from '@fcd/events';
import {
  fetchSize,
  type KeysetPage,
  keysetAfter,
  keysetOrderBy,
  keysetPage,
  type PageRequest,
  type Pool,
  type PoolClient,
  takeRows,
  UUID_LOWER_CASE,
} from '@fcd/service-kit';
import { BY_POSITION, EVENT_LIST } from './lists';
import { type RecoveryRequest, type RecoveryResult, recoverEvents } from './recovery';

/**
 * The durable event log (table `webhook.events`, docs/adr/0002-event-log-in-postgres.md): every
 * event of the four public types the dispatcher consumes, kept EVENT_RETENTION_DAYS. It feeds the
 * events API (GET /v1/events, oldest first by `position`) and recovery (POST
 * /v1/webhooks/{id}/recover). All its SQL is here; times are epoch ms from the caller's clock.
 */

/** Retention of the log, in days: the default, and the least the API promises (docs/webhooks.md). */
export const DEFAULT_EVENT_RETENTION_DAYS = 30;
export const MIN_EVENT_RETENTION_DAYS = 7;
export const MAX_EVENT_RETENTION_DAYS = 3650;
export const DAY_MS = 86_400_000;

/** Taken around every append: positions are assigned in commit order (see `append`). */
const APPEND_LOCK = 'webhook.events:append';

/** An event as the dispatcher consumed it. */
export interface LoggedEvent {
  id: string;
  type: string;
  /** The envelope exactly as published. */
  body: string;
  /** The facilities it concerns (lower-case UUIDs; `eventFacilityIds`). */
  facilityIds: readonly string[];
  /** The envelope's created_at, epoch ms. */
  createdAt: number;
}

/** One row of the log as the events API returns it. */
export interface StoredEvent {
  /** Decimal text of a bigint: the event's place in the log. */
  position: string;
  id: string;
  /** The envelope exactly as published. */
  body: string;
}

export interface EventFilter {
  type?: string;
  facilityId?: string;
  /** Only events created at or after this time (epoch ms). */
  since?: number;
}

export class EventLog {
  constructor(private readonly pool: Pool) {}

  /**
   * Appends events in the caller's transaction, in the given order, idempotently on the event id
   * (a redelivered event is not logged twice). Only the public event types are logged. The
   * transaction takes an advisory lock before the insert and holds it until it ends, so
   * positions are assigned in commit order: a reader that has seen position p and asks for
   * `position > p` never misses a row that commits later. Callers do their other writes first and
   * commit right after, to hold the lock briefly. Returns how many rows were added.
   */
  static async append(client: PoolClient, events: readonly LoggedEvent[], now: number): Promise<number> {
    const seen = new Set<string>();
    const rows = events.filter((e) => isEventType(e.type) && !seen.has(e.id) && seen.add(e.id));
    if (rows.length === 0) return 0;
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [APPEND_LOCK]);
    const { rowCount } = await client.query(
      `INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at)
       SELECT e.id, e.type, e.created_at, e.facility_ids::uuid[], e.body, $6
         FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[]) WITH ORDINALITY
              AS e(id, type, created_at, facility_ids, body, n)
        ORDER BY e.n
       ON CONFLICT (id) DO NOTHING`,
      [
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
      ],
    );
    return rowCount ?? 0;
  }

  /** Oldest first (by position), after `after` (a position) when given; one more than `limit` tells whether more follow. */
  async list(filter: EventFilter, limit: number, after?: string): Promise<{ items: StoredEvent[]; has_more: boolean }> {
    const params: unknown[] = [after ?? '0'];
    const where = [keysetAfter(BY_POSITION, ['$1::bigint'])];
    if (filter.type !== undefined) {
      params.push(filter.type);
      where.push(`type = $${params.length}`);
    }
    if (filter.facilityId !== undefined) {
      params.push(filter.facilityId.toLowerCase());
      where.push(`facility_ids @> ARRAY[$${params.length}::uuid]`);
    }
    if (filter.since !== undefined) {
      params.push(new Date(filter.since));
      where.push(`created_at >= $${params.length}`);
    }
    params.push(fetchSize(limit));
    const { rows } = await this.pool.query<StoredEvent>(
      // Ordered by the bigint column (e.position), not by its text alias.
      `SELECT e.position::text AS position, e.id, e.body FROM webhook.events e WHERE ${where.join(' AND ')} ORDER BY e.${keysetOrderBy(BY_POSITION)} LIMIT $${params.length}`,
      params,
    );
    return takeRows(rows, limit);
  }

  /** A page of the log for a request's limit and cursor (polled: see `EVENT_LIST`); 400 VALIDATION_ERROR for a bad one. */
  page(filter: EventFilter, request: PageRequest): Promise<KeysetPage<StoredEvent>> {
    return keysetPage<string, StoredEvent>(EVENT_LIST, request, (limit, after) => this.list(filter, limit, after));
  }

  async get(id: string): Promise<StoredEvent | undefined> {
    const { rows } = await this.pool.query<StoredEvent>('SELECT position::text AS position, id, body FROM webhook.events WHERE id = $1', [
      id,
    ]);
    return rows[0];
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
