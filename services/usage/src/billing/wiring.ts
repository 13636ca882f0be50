import type { grpc } from '@fcd/grpc';
import type { Clock, Logger, Pool, ServiceMetrics } from '@fcd/service-kit';
import { periodBounds } from '../domain/proration';
import type { AccountStore } from '../store/accounts';
import type { CounterStore } from '../store/counters';
import { StatementStore } from '../store/statements';
import type { BillingHttpDeps } from './admin-routes';
import { addBillingService } from './grpc';
import { landFromRedis } from './land';
import { createBillingMetrics } from './metrics';

/**
 * The billing close in the usage service: the admin routes' dependencies, with the billing metrics
 * on the service's registry; the latest close's gauges are read from the database at each scrape
 * (whoever closed: the CronJob's CLI, the admin API).
 */
export function billingHttpDeps(deps: {
  pool: Pool;
  accounts: AccountStore;
  counters: CounterStore;
  /** This replica's unflushed counts go to Postgres first. */
  flush: () => Promise<unknown>;
  clock: Clock;
  metrics: ServiceMetrics;
  logger: Logger;
}): BillingHttpDeps {
  const statements = new StatementStore(deps.pool);
  const metrics = createBillingMetrics(deps.metrics.registry, async () => {
    try {
      const latest = await statements.latestClose();
      return latest && { periodEnd: (periodBounds(latest.period)?.endMs ?? 0) / 1000, ...latest };
    } catch (err) {
      deps.logger.warn({ err: { message: (err as Error).message } }, 'billing gauges not read');
      return undefined;
    }
  });
  return { statements, clock: deps.clock, metrics, landCounts: landFromRedis(deps.counters, deps.accounts, deps.flush) };
}

/** BillingService on the usage gRPC server. */
export function addBillingGrpc(server: grpc.Server, pool: Pool, metrics: ServiceMetrics): void {
  addBillingService(server, new StatementStore(pool), metrics);
}
