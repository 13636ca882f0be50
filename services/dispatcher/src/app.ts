import {
  AppError,
  baseFastifyOptions,
  type Check,
  type HttpServerSettings,
  healthRoutes,
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
export async function buildDispatcherApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify(baseFastifyOptions(deps.logger, deps.http));
  installHttpConventions(app, { metrics: deps.metrics });
  app.setNotFoundHandler(async () => {
    throw new AppError('NOT_FOUND', 'No such route.');
  });
  await app.register(healthRoutes, { checks: deps.checks, isShuttingDown: deps.isShuttingDown });
  return app;
}
