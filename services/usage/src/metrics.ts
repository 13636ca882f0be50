import { Counter, createMetrics, Gauge, Histogram, type ServiceMetrics } from '@fcd/service-kit';

export interface UsageMetrics extends ServiceMetrics {
  decisions: Counter<'tier' | 'outcome'>;
  batchSize: Histogram<string>;
  seeds: Counter<string>;
  flushed: Counter<string>;
  storeErrors: Counter<'store'>;
  failOpen: Counter<string>;
  tooLate: Counter<string>;
  keysServedDuringOutage: Counter<string>;
  pendingCounters: Gauge<string>;
}

export function createUsageMetrics(): UsageMetrics {
  const base = createMetrics('usage');
  const registers = [base.registry];
  return {
    ...base,
    decisions: new Counter({
      name: 'fcd_rate_limit_decisions_total',
      help: 'Authorization decisions by tier and outcome (allowed, rate_limited, unauthenticated, unavailable).',
      labelNames: ['tier', 'outcome'] as const,
      registers,
    }),
    batchSize: new Histogram({
      name: 'fcd_authorize_batch_size',
      help: 'Requests per authorization batch.',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers,
    }),
    seeds: new Counter({ name: 'fcd_usage_seeds_total', help: 'Daily counts seeded into Redis from Postgres.', registers }),
    flushed: new Counter({ name: 'fcd_usage_counters_flushed_total', help: 'Daily counters written to Postgres.', registers }),
    storeErrors: new Counter({
      name: 'fcd_usage_store_errors_total',
      help: 'Failed operations against a store.',
      labelNames: ['store'] as const,
      registers,
    }),
    failOpen: new Counter({
      name: 'fcd_usage_fail_open_requests_total',
      help: 'Requests counted in Postgres because Redis was down and fail-open is enabled.',
      registers,
    }),
    tooLate: new Counter({
      name: 'fcd_usage_items_past_deadline_total',
      help: 'Authorization items not counted because their batch reached Redis after its count-by deadline.',
      registers,
    }),
    keysServedDuringOutage: new Counter({
      name: 'fcd_usage_keys_served_during_outage_total',
      help: 'Key lookups answered from the cache past its TTL because Postgres was unreachable.',
      registers,
    }),
    pendingCounters: new Gauge({ name: 'fcd_usage_pending_counters', help: 'Counters waiting for the next flush.', registers }),
  };
}
