import {
  AppError,
  baseFastifyOptions,
  type Check,
  checkReadiness,
  type HttpServerSettings,
  installHttpConventions,
  type Logger,
  type ServiceMetrics,
} from '@fcd/service-kit';
import Fastify, { type FastifyInstance } from 'fastify';

export interface AppDeps {
  logger: Logger;
  metrics?: ServiceMetrics;
  checks: Record<string, Check>;
  isShuttingDown: () => boolean;
  /** Timeouts and connection cap of the HTTP server. */
  http?: HttpServerSettings;
}

/** The dispatcher's HTTP surface: GET /healthz and GET /readyz (Postgres and NATS). */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify(baseFastifyOptions(deps.logger, deps.http));
  installHttpConventions(app, { metrics: deps.metrics });
  app.setNotFoundHandler(async () => {
    throw new AppError('NOT_FOUND', 'No such route.');
  });
  app.get('/healthz', async () => ({ data: { status: 'ok' } }));
  app.get('/readyz', async () => {
    if (deps.isShuttingDown()) {
      throw new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down.', {
        retryAfterSeconds: 1,
        details: { checks: { shutdown: { status: 'down', error: 'shutting down' } } },
      });
    }
    const report = await checkReadiness(deps.checks);
    if (!report.ready) {
      throw new AppError('SERVICE_UNAVAILABLE', 'A dependency is not available.', {
        retryAfterSeconds: 1,
        details: { checks: report.checks },
      });
    }
    return { data: { status: 'ready', checks: report.checks } };
  });
  return app;
}
