import type { TypedClient } from '@fcd/grpc';
import type { BillingService, UsageService } from '@fcd/proto';
import {
  AppError,
  baseFastifyOptions,
  type Check,
  type HttpServerSettings,
  type InternalAuth,
  installHttpConventions,
  type Logger,
  registerHealthRoutes,
  type ServiceMetrics,
} from '@fcd/service-kit';
import Fastify, { type FastifyInstance } from 'fastify';
import type { AuthorizationBatcher } from './auth/batcher';
import { canonicalRouting } from './auth/canonical-path';
import { installMetering } from './auth/metering';
import type { Upstream } from './clients/proxy';
import type { IdempotencyStore } from './http/idempotency';
import { registerApiReference } from './openapi';
import { type PortalSessionDeps, registerPortalSessionRoutes } from './portal/session-routes';
import { registerPortalStatic } from './portal/static';
import { registerAccountStatementsRoute } from './routes/account-statements';
import { type ExportLimits, registerExports } from './routes/exports';
import { registerMethodNotAllowed, registerProxyRoutes } from './routes/proxy';
import type { Target } from './routes/table';
import { registerUsageRoute } from './routes/usage';

export interface GatewayDeps extends PortalSessionDeps {
  logger: Logger;
  metrics: ServiceMetrics & { onDecision?: (tier: string, outcome: string) => void };
  batcher: AuthorizationBatcher;
  usage: TypedClient<typeof UsageService>;
  /** The usage service's BillingService (GET /v1/account/statements). */
  billing: TypedClient<typeof BillingService>;
  upstreams: Record<Exclude<Target, 'local'>, Upstream>;
  internalAuth: InternalAuth;
  /** Idempotency-Key records (Redis). */
  idempotency: IdempotencyStore;
  /** How long a duplicate of a POST still in progress waits for its answer before a 409. */
  idempotencyWaitMs: number;
  readiness: Record<string, Check>;
  isShuttingDown: () => boolean;
  /** Timeouts and connection cap of the HTTP server. */
  http?: HttpServerSettings;
  /** Bulk exports: per-account concurrency and the send timeout. */
  exports: ExportLimits;
}

/** The public HTTP surface: health, authentication and metering of /v1, routing to the domain services. */
export function buildGatewayApp(deps: GatewayDeps): FastifyInstance {
  // One view of the path for the router, the tier gates, the metering and the upstream: the
  // canonical target, computed once before routing (docs/api.md, "Path normalisation").
  const canonical = canonicalRouting();
  const app = Fastify({ ...baseFastifyOptions(deps.logger, deps.http), rewriteUrl: canonical.rewriteUrl });
  installHttpConventions(app, { metrics: deps.metrics });
  app.addHook('onRequest', canonical.refuseMalformed);

  // Health: unauthenticated, unversioned, never counted.
  registerHealthRoutes(app, { checks: deps.readiness, isShuttingDown: deps.isShuttingDown, hideErrors: true });

  // API reference (OpenAPI document and its HTML page): outside /v1, so unauthenticated and never counted.
  registerApiReference(app);
  registerPortalStatic(app);

  // The portal's sign-in and session routes: outside /v1, never counted (docs/api.md, "Portal").
  registerPortalSessionRoutes(app, deps);
  installMetering(app, deps.batcher);
  registerProxyRoutes(app, deps);
  registerUsageRoute(app, deps);
  registerAccountStatementsRoute(app, deps);
  registerExports(app, {
    facility: deps.upstreams.facility,
    internalAuth: deps.internalAuth,
    batcher: deps.batcher,
    limits: deps.exports,
  });

  registerMethodNotAllowed(app);

  app.setNotFoundHandler(async (request) => {
    throw new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}.`);
  });
  return app;
}
