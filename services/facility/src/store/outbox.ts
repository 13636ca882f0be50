import type { EventType } from '@fcd/events';
import type { EchoSyncStats, OutboxStats } from '../metrics';
import type { Queryable } from './queries';

export interface OutboxRow {
  id: string;
  type: EventType;
  payload: string;
  /** The trace context of the transaction that wrote the row (see traceContextColumn), or null. */
  trace_context: string | null;
}

/**
 * Claims the oldest unsent rows. FOR UPDATE SKIP LOCKED lets several relay
 * replicas work side by side: each claims a disjoint batch, and a batch held by
 * a replica that dies is released with its connection. Runs in the caller's
 * transaction.
 *
 * Marking a row sent leaves a dead entry in `outbox_pending_idx` until VACUUM.
 * A plain index scan marks each dead entry it meets as dead in the index, so
 * the next claim skips it; a bitmap scan never does, and visits every row sent
 * since the last VACUUM on every claim (seen under the paced benchmark: 6,020
 * entries and 563 heap pages for 0 pending rows, 1.4 ms a claim, growing). The
 * planner chooses the bitmap scan when its statistics overstate the pending
 * rows, so this transaction rules bitmap scans out.
 */
export async function claimBatch(client: Queryable, limit: number): Promise<OutboxRow[]> {
  const results = (await client.query(claimBatchSql(limit))) as unknown as Array<{ rows: OutboxRow[] }>;
  return results.at(-1)?.rows ?? [];
}

/**
 * `claimBatch`'s SQL: the setting and the claim, without parameters (the limit inlined, a checked
 * integer), so one simple-protocol message sends them, and the relay sends them with its BEGIN.
 */
export function claimBatchSql(limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`outbox batch size must be a positive integer, got ${limit}`);
  return `SET LOCAL enable_bitmapscan = off;
     SELECT id, type, payload, trace_context FROM outbox WHERE sent_at IS NULL ORDER BY seq LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
}

export async function markSent(client: Queryable, ids: string[], sentAt: string): Promise<void> {
  if (ids.length === 0) return;
  await client.query('UPDATE outbox SET sent_at = $2::timestamptz WHERE id = ANY($1::uuid[])', [ids, sentAt]);
}

export async function outboxStats(db: Queryable, now: string): Promise<OutboxStats> {
  const { rows } = await db.query<{ pending: number; oldest_age_seconds: number | null }>(
    `SELECT count(*)::int AS pending,
            EXTRACT(EPOCH FROM ($1::timestamptz - min(created_at)))::float8 AS oldest_age_seconds
       FROM outbox WHERE sent_at IS NULL`,
    [now],
  );
  const r = rows[0];
  return { pending: r?.pending ?? 0, oldest_age_seconds: Math.max(0, r?.oldest_age_seconds ?? 0) };
}

/** Deletes up to `limit` rows sent before `before`; returns how many. */
export async function deleteSentBefore(db: Queryable, before: string, limit = 5000): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM outbox WHERE id IN (
       SELECT id FROM outbox WHERE sent_at IS NOT NULL AND sent_at < $1::timestamptz LIMIT $2)`,
    [before, limit],
  );
  return rowCount ?? 0;
}

const ECHO_OUTCOMES = ['read', 'inserted', 'changed', 'unchanged', 'rejected', 'missing'] as const;

/** The last successful ECHO sync for the metrics (outcome applied or rows_rejected), or null. */
export async function echoSyncStats(db: Queryable): Promise<EchoSyncStats | null> {
  const { rows } = await db.query<{ finished: number; duration: number; summary: { files?: Array<Record<string, unknown>> } | null }>(
    `SELECT EXTRACT(EPOCH FROM finished_at)::float8 AS finished, EXTRACT(EPOCH FROM (finished_at - started_at))::float8 AS duration, summary
       FROM echo_sync_runs WHERE outcome IN ('applied', 'rows_rejected') ORDER BY finished_at DESC LIMIT 1`,
  );
  const r = rows[0];
  if (!r) return null;
  const files = (r.summary?.files ?? [])
    .filter((f) => typeof f.file === 'string' && f.error === undefined)
    .map((f) => ({
      file: f.file as string,
      counts: Object.fromEntries(ECHO_OUTCOMES.map((o) => [o, Number(f[o] ?? 0)])),
    }));
  return { finished_at_seconds: r.finished, duration_seconds: r.duration, files };
}
