import { Counter, createMetrics, Gauge, type ServiceMetrics } from '@fcd/service-kit';
import type { RecordKind } from './domain/records';

export type IngestOutcome = 'inserted' | 'updated' | 'unchanged' | 'rejected';

export interface FacilityMetrics extends ServiceMetrics {
  eventsPublished: Counter<'type'>;
  ingestRows: Counter<'kind' | 'outcome'>;
  outboxPending: Gauge;
  outboxOldestAge: Gauge;
}

export interface OutboxStats {
  pending: number;
  oldest_age_seconds: number;
}

/**
 * The service's registry: process + RED metrics from service-kit and the
 * domain's own: events published by type, ingested rows by outcome, and the
 * outbox backlog (read from Postgres at scrape time, so every replica reports
 * the same shared backlog).
 */
export function createFacilityMetrics(outboxStats: () => Promise<OutboxStats>): FacilityMetrics {
  const base = createMetrics('facility');
  const registers = [base.registry];
  let last: Promise<OutboxStats> | undefined;
  // Both gauges are collected in one scrape; share one query between them.
  const stats = () => {
    last ??= outboxStats()
      .catch(() => ({ pending: Number.NaN, oldest_age_seconds: Number.NaN }))
      .finally(() => {
        setTimeout(() => {
          last = undefined;
        }, 50).unref();
      });
    return last;
  };
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

/** Counts ingested rows; the CLI, which has no scrape endpoint, passes none. */
export type IngestRowsCounter = Pick<Counter<'kind' | 'outcome'>, 'inc'>;
export function countRows(counter: IngestRowsCounter | undefined, kind: RecordKind, outcome: IngestOutcome, n: number): void {
  if (counter && n > 0) counter.inc({ kind, outcome }, n);
}
