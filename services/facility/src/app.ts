import {
  baseFastifyOptions,
  type Check,
  gatewayAccounts,
  type HttpServerSettings,
  healthRoutes,
  type InternalAuth,
  installHttpConventions,
  type Logger,
  methodNotAllowed,
  notFound,
  requireBearerToken,
  sendError,
} from '@fcd/service-kit';
import Fastify, { type FastifyInstance, type HTTPMethods } from 'fastify';
import type { FacilityMetrics } from './metrics';
import { exportRoutes } from './routes/exports';
import { ingestRoutes } from './routes/ingest';
import { internalRoutes } from './routes/internal';
import { publicRoutes } from './routes/public';
import { sourcesRoutes } from './routes/sources';
import type { Ingestion } from './store/ingestion';
import type { Queryable } from './store/queries';

export interface AppDeps {
  logger: Logger;
  metrics?: FacilityMetrics;
  /** Read access to Postgres (outages become 503). */
  db: Queryable;
  ingestion: Ingestion;
  auth: InternalAuth;
  ingestToken: string;
  ingestMaxBodyBytes: number;
  readiness: Record<string, Check>;
  isShuttingDown?: () => boolean;
  /** Timeouts and connection cap of the HTTP server. */
  http?: HttpServerSettings;
}

const METHODS: HTTPMethods[] = ['DELETE', 'GET', 'PATCH', 'POST', 'PUT'];

/**
 * The facility service's HTTP app: health, the public read API (gateway-signed
 * account header required), the internal facility-id check (same header) and
 * the ingestion API (bearer token). Unknown paths are 404 NOT_FOUND; a known
 * path with another method is 405 METHOD_NOT_ALLOWED with Allow.
 */
export async function buildFacilityApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify(baseFastifyOptions(deps.logger, deps.http));
  installHttpConventions(app, deps.metrics ? { metrics: deps.metrics } : {});

  const methodsByUrl = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    const set = methodsByUrl.get(route.url) ?? new Set<string>();
    for (const m of [route.method].flat()) set.add(m);
    methodsByUrl.set(route.url, set);
  });

  await app.register(healthRoutes, { checks: deps.readiness, isShuttingDown: deps.isShuttingDown ?? (() => false) });

  await app.register(async (scope) => {
    // The gateway's signed account header, signed for the gateway's upstream name `facility`.
    const accounts = gatewayAccounts(deps.auth, 'facility');
    scope.addHook('onRequest', accounts.verify);
    await scope.register(publicRoutes, { db: deps.db });
    await scope.register(sourcesRoutes, { db: deps.db });
    await scope.register(internalRoutes, { db: deps.db });
    await scope.register(exportRoutes, { db: deps.db, accounts });
  });

  await app.register(async (scope) => {
    scope.addHook(
      'onRequest',
      requireBearerToken(deps.ingestToken, { message: 'A valid ingestion token is required. Send it as Authorization: Bearer <token>.' }),
    );
    await scope.register(ingestRoutes, { ingestion: deps.ingestion, bodyLimit: deps.ingestMaxBodyBytes });
  });

  for (const [url, methods] of [...methodsByUrl]) {
    const allowed = METHODS.filter((m) => methods.has(m));
    if (allowed.length > 0) methodNotAllowed(app, url, allowed, { methods: METHODS });
  }

  app.setNotFoundHandler((_request, reply) => sendError(reply, notFound('route')));
  return app;
}
