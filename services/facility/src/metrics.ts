import { Counter, createMetrics, Gauge, type ServiceMetrics } from '@fcd/service-kit';
import type { RecordKind } from './domain/records';

export type IngestOutcome = 'inserted' | 'updated' | 'unchanged' | 'rejected';

export interface FacilityMetrics extends ServiceMetrics {
  eventsPublished: Counter<'type'>;
  ingestRows: Counter<'kind' | 'outcome'>;
  outboxPending: Gauge;
  outboxOldestAge: Gauge;
  echoSyncLastSuccess: Gauge;
  echoSyncDuration: Gauge;
  echoSyncRows: Gauge<'file' | 'outcome'>;
}

/** The last successful ECHO sync (echo_sync_runs), or null when none finished yet. */
export interface EchoSyncStats {
  finished_at_seconds: number;
  duration_seconds: number;
  /** Rows of each file by outcome: read, inserted, changed, unchanged, rejected, missing. */
  files: Array<{ file: string; counts: Record<string, number> }>;
}

export interface OutboxStats {
  pending: number;
  oldest_age_seconds: number;
}

type Registers = ServiceMetrics['registry'][];

/**
 * One call of `load` shared by every gauge collected in the same scrape (they ask within
 * milliseconds of each other), answering `failed` when it throws.
 */
function perScrape<T>(load: () => Promise<T>, failed: T): () => Promise<T> {
  let last: Promise<T> | undefined;
  return () => {
    last ??= load()
      .catch(() => failed)
      .finally(() => {
        setTimeout(() => {
          last = undefined;
        }, 50).unref();
      });
    return last;
  };
}

/** The outbox backlog, read from Postgres at scrape time (so every replica reports the same shared backlog). */
function outboxGauges(
  registers: Registers,
  outboxStats: () => Promise<OutboxStats>,
): Pick<FacilityMetrics, 'outboxPending' | 'outboxOldestAge'> {
  const stats = perScrape(outboxStats, { pending: Number.NaN, oldest_age_seconds: Number.NaN });
  return {
    outboxPending: new Gauge({
      name: 'fcd_facility_outbox_pending',
      help: 'Outbox rows not yet published.',
      registers,
      async collect() {
        this.set((await stats()).pending);
      },
    }),
    outboxOldestAge: new Gauge({
      name: 'fcd_facility_outbox_oldest_age_seconds',
      help: 'Age of the oldest unpublished outbox row in seconds (0 when none).',
      registers,
      async collect() {
        this.set((await stats()).oldest_age_seconds);
      },
    }),
  };
}

/**
 * The ECHO sync runs as a CronJob with no scrape endpoint of its own: it records each run in
 * Postgres (echo_sync_runs) and every facility replica exports the last successful one.
 */
function echoSyncGauges(
  registers: Registers,
  echoSyncStats: () => Promise<EchoSyncStats | null>,
): Pick<FacilityMetrics, 'echoSyncLastSuccess' | 'echoSyncDuration' | 'echoSyncRows'> {
  // undefined: Postgres unreachable (NaN); null: no sync finished yet (0).
  const echo = perScrape<EchoSyncStats | null | undefined>(echoSyncStats, undefined);
  return {
    echoSyncLastSuccess: new Gauge({
      name: 'fcd_facility_echo_sync_last_success_timestamp_seconds',
      help: 'Unix time the last successful ECHO sync finished (0 when none has; NaN when Postgres is unreachable).',
      registers,
      async collect() {
        const s = await echo();
        this.set(s === undefined ? Number.NaN : (s?.finished_at_seconds ?? 0));
      },
    }),
    echoSyncDuration: new Gauge({
      name: 'fcd_facility_echo_sync_duration_seconds',
      help: 'Duration of the last successful ECHO sync in seconds.',
      registers,
      async collect() {
        const s = await echo();
        this.set(s === undefined ? Number.NaN : (s?.duration_seconds ?? 0));
      },
    }),
    echoSyncRows: new Gauge({
      name: 'fcd_facility_echo_sync_rows',
      help: 'Rows of each file in the last successful ECHO sync, by outcome (read, inserted, changed, unchanged, rejected, missing).',
      labelNames: ['file', 'outcome'] as const,
      registers,
      async collect() {
        const s = await echo();
        this.reset();
        for (const f of s?.files ?? []) for (const [outcome, n] of Object.entries(f.counts)) this.set({ file: f.file, outcome }, n);
      },
    }),
  };
}

/**
 * The service's registry: process + RED metrics from service-kit and the
 * domain's own: events published by type, ingested rows by outcome, the
 * outbox backlog and the last ECHO sync.
 */
export function createFacilityMetrics(
  outboxStats: () => Promise<OutboxStats>,
  echoSyncStats: () => Promise<EchoSyncStats | null> = async () => null,
): FacilityMetrics {
  const base = createMetrics('facility');
  const registers = [base.registry];
  return {
    ...base,
    eventsPublished: new Counter({
      name: 'fcd_facility_events_published_total',
      help: 'Domain events published to JetStream (acknowledged), by event type.',
      labelNames: ['type'] as const,
      registers,
    }),
    ingestRows: new Counter({
      name: 'fcd_facility_ingest_rows_total',
      help: 'Ingested rows by record kind and outcome (inserted, updated, unchanged, rejected).',
      labelNames: ['kind', 'outcome'] as const,
      registers,
    }),
    ...outboxGauges(registers, outboxStats),
    ...echoSyncGauges(registers, echoSyncStats),
  };
}

/** Counts ingested rows; the CLI, which has no scrape endpoint, passes none. */
export type IngestRowsCounter = Pick<Counter<'kind' | 'outcome'>, 'inc'>;
export function countRows(counter: IngestRowsCounter | undefined, kind: RecordKind, outcome: IngestOutcome, n: number): void {
  if (counter && n > 0) counter.inc({ kind, outcome }, n);
}
