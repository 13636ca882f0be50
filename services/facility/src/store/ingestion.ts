import { EVENT_TYPES, type EventType } from '@fcd/events';
import type { Clock, IdSource, Pool } from '@fcd/service-kit';
import { isoTimestamp, withTransactionFrom } from '@fcd/service-kit';
import { NATURAL_KEY, PARSERS, RECORD_KINDS, type RecordKind, type RecordOf } from '../domain/records';
import type { SourceRow } from '../domain/row-source';
import { countRows, type IngestRowsCounter } from '../metrics';
import {
  type BatchOutcome,
  LOCK_INGESTION_SQL,
  type RowError,
  type RowRef,
  type Staged,
  upsertCases,
  upsertFacilities,
  upsertViolations,
  type WriteContext,
  writeOutbox,
} from './ingest';
import type { Queryable } from './queries';

interface KindCounts {
  received: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
}

export interface IngestReport {
  counts: Record<RecordKind, KindCounts>;
  events: Record<EventType, number>;
  errors: RowError[];
  /** True when more errors occurred than the report lists. */
  errors_truncated: boolean;
}

export interface RawRow {
  ref: RowRef;
  raw: Record<string, unknown>;
}

export interface IngestionDeps {
  pool: Pool;
  clock: Clock;
  ids: IdSource;
  rowsCounter?: IngestRowsCounter;
  /** Called after a commit that wrote outbox rows (the in-process relay wakes up). */
  onEventsCommitted?: () => void;
  /** Rows per multi-row upsert. */
  chunkSize?: number;
  /** Errors listed in a report; the rest are counted in `rejected`. */
  maxErrors?: number;
}

const UPSERT: { [K in RecordKind]: (ctx: WriteContext, rows: Staged<RecordOf[K]>[]) => Promise<BatchOutcome> } = {
  facilities: upsertFacilities,
  violations: upsertViolations,
  cases: upsertCases,
};

export function emptyReport(): IngestReport {
  const counts = {} as Record<RecordKind, KindCounts>;
  for (const k of RECORD_KINDS) counts[k] = { received: 0, inserted: 0, updated: 0, unchanged: 0, rejected: 0 };
  const evts = {} as Record<EventType, number>;
  for (const t of EVENT_TYPES) evts[t] = 0;
  return { counts, events: evts, errors: [], errors_truncated: false };
}

/**
 * Ingestion: parses raw rows into records, groups them into chunks of distinct
 * natural keys (a key seen again starts a new chunk, so a later row applies
 * after an earlier one), upserts each chunk with one statement and writes the
 * events of what changed to the outbox in the same transaction.
 */
export class Ingestion {
  private readonly chunkSize: number;
  private readonly maxErrors: number;

  constructor(private readonly deps: IngestionDeps) {
    this.chunkSize = deps.chunkSize ?? 1000;
    this.maxErrors = deps.maxErrors ?? 1000;
  }

  /** All rows of a request in one transaction: either everything valid lands, or (on an outage) nothing. */
  async ingestAll(input: { [K in RecordKind]?: RawRow[] }): Promise<IngestReport> {
    const report = emptyReport();
    let eventCount = 0;
    // The lock goes out with the BEGIN: one round trip less per request.
    await withTransactionFrom(this.deps.pool, LOCK_INGESTION_SQL, async (client) => {
      const fresh = emptyReport();
      const ctx = this.context(client);
      for (const kind of RECORD_KINDS) {
        for (const chunk of this.chunks(kind, input[kind] ?? [], fresh)) {
          eventCount += await this.apply(ctx, kind, chunk, fresh);
        }
      }
      Object.assign(report, fresh);
    });
    this.afterCommit(report, eventCount);
    return report;
  }

  /** A stream of rows of one kind (a file): one transaction per chunk, so memory stays flat. */
  async ingestStream(kind: RecordKind, rows: AsyncIterable<SourceRow>): Promise<IngestReport> {
    const report = emptyReport();
    let pending: RawRow[] = [];
    const flush = async () => {
      const batch = pending;
      pending = [];
      const chunkReport = emptyReport();
      let eventCount = 0;
      await withTransactionFrom(this.deps.pool, LOCK_INGESTION_SQL, async (client) => {
        const ctx = this.context(client);
        for (const chunk of this.chunks(kind, batch, chunkReport)) eventCount += await this.apply(ctx, kind, chunk, chunkReport);
      });
      this.merge(report, chunkReport);
      this.afterCommit(chunkReport, eventCount);
    };
    for await (const row of rows) {
      if ('problems' in row) {
        report.counts[kind].received++;
        report.counts[kind].rejected++;
        countRows(this.deps.rowsCounter, kind, 'rejected', 1);
        for (const p of row.problems) this.addError(report, { kind, line: row.line, ...p });
        if (row.fatal) break;
        continue;
      }
      pending.push({ ref: { line: row.line }, raw: row.raw });
      if (pending.length >= this.chunkSize) await flush();
    }
    if (pending.length > 0) await flush();
    report.errors.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
    return report;
  }

  private context(client: Queryable): WriteContext {
    return { client, now: isoTimestamp(this.deps.clock.now()), ids: this.deps.ids };
  }

  /** Parses rows (recording failures) and splits the good ones into chunks of distinct keys. */
  private *chunks<K extends RecordKind>(kind: K, rows: RawRow[], report: IngestReport): Generator<Staged<RecordOf[K]>[]> {
    const key = NATURAL_KEY[kind] as keyof RecordOf[K];
    let chunk: Staged<RecordOf[K]>[] = [];
    let keys = new Set<unknown>();
    for (const row of rows) {
      report.counts[kind].received++;
      const parsed = PARSERS[kind](row.raw);
      if (!parsed.ok) {
        report.counts[kind].rejected++;
        for (const p of parsed.problems) this.addError(report, { kind, ...row.ref, ...p });
        continue;
      }
      const k = parsed.record[key];
      if (chunk.length >= this.chunkSize || keys.has(k)) {
        yield chunk;
        chunk = [];
        keys = new Set();
      }
      chunk.push({ ref: row.ref, record: parsed.record as RecordOf[K] });
      keys.add(k);
    }
    if (chunk.length > 0) yield chunk;
  }

  private async apply<K extends RecordKind>(
    ctx: WriteContext,
    kind: K,
    chunk: Staged<RecordOf[K]>[],
    report: IngestReport,
  ): Promise<number> {
    const out = await UPSERT[kind](ctx, chunk);
    await writeOutbox(ctx.client, out.events);
    const c = report.counts[kind];
    c.inserted += out.inserted;
    c.updated += out.updated;
    c.unchanged += out.unchanged;
    c.rejected += out.rejected;
    for (const e of out.errors) this.addError(report, e);
    for (const e of out.events) report.events[e.type]++;
    return out.events.length;
  }

  private addError(report: IngestReport, error: RowError): void {
    if (report.errors.length < this.maxErrors) report.errors.push(error);
    else report.errors_truncated = true;
  }

  private merge(into: IngestReport, from: IngestReport): void {
    for (const k of RECORD_KINDS) {
      const a = into.counts[k];
      const b = from.counts[k];
      a.received += b.received;
      a.inserted += b.inserted;
      a.updated += b.updated;
      a.unchanged += b.unchanged;
      a.rejected += b.rejected;
    }
    for (const t of EVENT_TYPES) into.events[t] += from.events[t];
    for (const e of from.errors) this.addError(into, e);
    if (from.errors_truncated) into.errors_truncated = true;
  }

  private afterCommit(report: IngestReport, eventCount: number): void {
    for (const k of RECORD_KINDS) {
      const c = report.counts[k];
      countRows(this.deps.rowsCounter, k, 'inserted', c.inserted);
      countRows(this.deps.rowsCounter, k, 'updated', c.updated);
      countRows(this.deps.rowsCounter, k, 'unchanged', c.unchanged);
      countRows(this.deps.rowsCounter, k, 'rejected', c.rejected);
    }
    if (eventCount > 0) this.deps.onEventsCommitted?.();
  }
}
