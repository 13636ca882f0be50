import { AppError, type Check, checkReadiness } from '@fcd/service-kit';
import type { FastifyInstance } from 'fastify';
import { HealthResponse } from './schemas';

export interface HealthOptions {
  checks: Record<string, Check>;
  /** True once shutdown began: readiness fails so no new traffic is routed here. */
  shuttingDown: () => boolean;
}

/** GET /healthz (the process serves) and GET /readyz (Postgres and NATS answer). Unauthenticated. */
export async function healthRoutes(app: FastifyInstance, opts: HealthOptions): Promise<void> {
  app.get('/healthz', { schema: { response: { 200: HealthResponse } } }, async () => ({ data: { status: 'ok' } }));

  app.get('/readyz', { schema: { response: { 200: HealthResponse } } }, async () => {
    const report = await checkReadiness(opts.checks);
    if (opts.shuttingDown()) {
      throw new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down.', {
        retryAfterSeconds: 1,
        details: { checks: { ...report.checks, process: { status: 'down', error: 'shutting down' } } },
      });
    }
    if (!report.ready) {
      const down = Object.entries(report.checks)
        .filter(([, c]) => c.status === 'down')
        .map(([n]) => n);
      throw new AppError('SERVICE_UNAVAILABLE', `Not ready: ${down.join(', ')} unavailable.`, {
        retryAfterSeconds: 1,
        details: { checks: report.checks },
      });
    }
    return { data: { status: 'ok' } };
  });
}
