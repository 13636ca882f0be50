import type { Clock } from '@fcd/service-kit';
import type { Logger } from 'pino';
import type { UsageMetrics } from '../metrics';

/**
 * After a failed Postgres call, Postgres is taken as unreachable for
 * `retryMs`: key lookups and usage reports go straight to their outage
 * fallbacks instead of waiting on it again.
 */
export class PostgresHealth {
  private downUntil = 0;

  constructor(
    private readonly deps: { clock: Clock; logger: Logger; metrics: UsageMetrics },
    private readonly retryMs = 1000,
  ) {}

  down(): boolean {
    return this.deps.clock.now() < this.downUntil;
  }

  /** Records a failed call (`what` names it in the log, once per outage). */
  failed(err: unknown, what: string): void {
    const { clock, logger, metrics } = this.deps;
    if (!this.down()) logger.warn({ err: { message: (err as Error).message } }, `${what} failed: postgres unavailable`);
    metrics.storeErrors.inc({ store: 'postgres' });
    this.downUntil = clock.now() + this.retryMs;
  }
}
