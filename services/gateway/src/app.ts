import type { TypedClient } from '@fcd/grpc';
import type { GetUsageResponse, UsageService } from '@fcd/proto';
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
  UNAUTHORIZED_MESSAGE,
} from '@fcd/service-kit';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { AuthorizationBatcher } from './auth/batcher';
import { canonicalRouting } from './auth/canonical-path';
import { installMetering } from './auth/metering';
import type { Upstream } from './clients/proxy';
import type { IdempotencyStore } from './http/idempotency';
import { registerApiReference } from './openapi';
import { type ExportLimits, registerExports } from './routes/exports';
import { registerMethodNotAllowed, registerProxyRoutes } from './routes/proxy';
import type { Target } from './routes/table';
import { registerUsageRoute } from './routes/usage';

export interface GatewayDeps {
  logger: Logger;
  metrics: ServiceMetrics & { onDecision?: (tier: string, outcome: string) => void };
  batcher: AuthorizationBatcher;
  usage: TypedClient<typeof UsageService>;
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

export interface AuthenticatedAccount {
  accountId: string;
  tier: string;
  tierRank: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    account?: AuthenticatedAccount;
    /** The usage report computed with the authorization (GET /v1/account/usage). */
    usageReport?: GetUsageResponse;
    /**
     * Set for a conditional GET, authorized with a peek (not counted): it is counted before any
     * answer but a 304 is sent (docs/metering.md, "Conditional GETs").
     */
    uncounted?: { apiKey: string; path: string };
    /** The API key, kept for the per-page counts of an export. */
    meterKey?: string;
  }
}

/** The account a /v1 request was authenticated as; 401 when there is none. */
export function requireAccount(request: FastifyRequest): AuthenticatedAccount {
  if (!request.account) throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
  return request.account;
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

  installMetering(app, deps.batcher);
  registerProxyRoutes(app, deps);
  registerUsageRoute(app, deps);
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
