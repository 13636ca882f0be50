import { Counter, Gauge, type Registry } from '@fcd/service-kit';

/** The billing metrics (docs/operations.md, "Billing close"), on the usage service's registry. */
export interface BillingMetrics {
  /** Statements written by closes run in this process (admin API), by outcome: closed, adjusted, unchanged. */
  statements: Counter<'outcome'>;
  /** USD of the statements and adjustments written by closes run in this process. */
  amountUsd: Counter<string>;
}

/** The latest period closed to its end, as the database says at a scrape. */
export interface LatestClose {
  /** End of the period, Unix seconds. */
  periodEnd: number;
  statements: number;
  amountMicroUsd: bigint;
}

export function createBillingMetrics(registry: Registry, latest: () => Promise<LatestClose | undefined>): BillingMetrics {
  const registers = [registry];
  // One read per scrape serves the three gauges (each collect asks; the first answer is shared).
  let pending: Promise<LatestClose | undefined> | undefined;
  const read = () => {
    pending ??= latest().finally(() => setTimeout(() => (pending = undefined), 1000).unref());
    return pending;
  };
  // Declared one by one (scripts/chart/chart.test.ts finds every metric by its `name:`).
  new Gauge({
    name: 'fcd_billing_last_closed_period_end_timestamp_seconds',
    help: 'End (Unix seconds) of the latest billing period whose close ran to its end, whoever ran it; the alert FcdBillingPeriodNotClosed reads it.',
    registers,
    async collect() {
      const l = await read();
      if (l) this.set(l.periodEnd);
    },
  });
  new Gauge({
    name: 'fcd_billing_last_closed_statements',
    help: 'Statements of the latest closed billing period.',
    registers,
    async collect() {
      const l = await read();
      if (l) this.set(l.statements);
    },
  });
  new Gauge({
    name: 'fcd_billing_last_closed_amount_usd',
    help: 'USD billed for the latest closed billing period, statements plus adjustments (monitoring: the statements hold the exact figures).',
    registers,
    async collect() {
      const l = await read();
      if (l) this.set(Number(l.amountMicroUsd) / 1e6);
    },
  });
  return {
    statements: new Counter({
      name: 'fcd_billing_statements_closed_total',
      help: 'Statements a billing close run by this process wrote (closed), corrected with an adjustment row (adjusted) or left as they were (unchanged).',
      labelNames: ['outcome'] as const,
      registers,
    }),
    amountUsd: new Counter({
      name: 'fcd_billing_closed_amount_usd_total',
      help: 'USD of the statements and adjustment rows written by billing closes run by this process (monitoring only).',
      registers,
    }),
  };
}
