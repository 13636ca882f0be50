import { AppError, type Check, checkReadiness } from '@fcd/service-kit';
import type { FastifyInstance } from 'fastify';

export interface HealthRoutesOptions {
  checks: Record<string, Check>;
  /** True once shutdown began: the instance reports not ready so traffic drains away. */
  isShuttingDown: () => boolean;
}

/** GET /healthz (the process serves) and GET /readyz (Postgres and the facility service answer). Unauthenticated. */
export async function healthRoutes(app: FastifyInstance, options: HealthRoutesOptions): Promise<void> {
  app.get('/healthz', async () => ({ data: { status: 'ok' } }));

  app.get('/readyz', async () => {
    if (options.isShuttingDown()) {
      throw new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down.', {
        retryAfterSeconds: 1,
        details: { checks: { shutdown: { status: 'down', error: 'shutting down' } } },
      });
    }
    const report = await checkReadiness(options.checks);
    if (!report.ready) {
      throw new AppError('SERVICE_UNAVAILABLE', 'A dependency is not available.', {
        retryAfterSeconds: 1,
        details: { checks: report.checks },
      });
    }
    return { data: { status: 'ready', checks: report.checks } };
  });
}
