import { create } from '@bufbuild/protobuf';
import { fromGrpcError, type TypedClient } from '@fcd/grpc';
import { type AuthorizeResult, Decision, GetUsageRequestSchema, type GetUsageResponse, type UsageService } from '@fcd/proto';
import {
  AppError,
  baseFastifyOptions,
  type Check,
  checkReadiness,
  errorBody,
  type HttpServerSettings,
  type InternalAuth,
  installHttpConventions,
  type Logger,
  type ServiceMetrics,
  serviceUnavailable,
  UNAUTHORIZED_MESSAGE,
} from '@fcd/service-kit';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { AuthorizationBatcher } from './auth/batcher';
import { registerApiReference } from './openapi';
import { ALL_METHODS, PUBLIC_ROUTES, type Target, TIER_GATED_PREFIXES } from './routes/table';
import { NoQuery, UsageResponseSchema } from './routes/usage-schema';
import type { Upstream } from './upstream/proxy';

export interface GatewayDeps {
  logger: Logger;
  metrics: ServiceMetrics & { onDecision?: (tier: string, outcome: string) => void };
  batcher: AuthorizationBatcher;
  usage: TypedClient<typeof UsageService>;
  upstreams: Record<Exclude<Target, 'local'>, Upstream>;
  internalAuth: InternalAuth;
  readiness: Record<string, Check>;
  isShuttingDown: () => boolean;
  /** Timeouts and connection cap of the HTTP server. */
  http?: HttpServerSettings;
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
  }
}

const USAGE_PATH = '/v1/account/usage';

/** 403 when the path lies under a tier-gated prefix the account's tier does not reach. */
function tierGate(path: string, result: AuthorizeResult): AppError | undefined {
  for (const gate of TIER_GATED_PREFIXES) {
    if (path !== gate.prefix && !path.startsWith(`${gate.prefix}/`)) continue;
    if (result.tierRank >= gate.minTierRank) return undefined;
    return new AppError('FORBIDDEN', 'Webhooks are available on the Pro tier and above. Upgrade the account to use them.', {
      details: { required_tier: gate.requiredTier, tier: result.tier },
    });
  }
  return undefined;
}

function setRateLimitHeaders(reply: FastifyReply, r: AuthorizeResult): void {
  reply.header('x-ratelimit-limit', String(r.dailyLimit));
  reply.header('x-ratelimit-remaining', String(r.remaining));
  reply.header('x-ratelimit-reset', r.resetsAt);
}

function rateLimited(r: AuthorizeResult): AppError {
  return new AppError(
    'RATE_LIMIT_EXCEEDED',
    `Daily request limit of ${r.dailyLimit} requests exceeded. The limit resets at ${r.resetsAt}.`,
    { details: { limit: r.dailyLimit, remaining: 0, resets_at: r.resetsAt }, retryAfterSeconds: r.retryAfterSeconds },
  );
}

/** The public HTTP surface: health, authentication and metering of /v1, routing to the domain services. */
export function buildGatewayApp(deps: GatewayDeps): FastifyInstance {
  const app = Fastify(baseFastifyOptions(deps.logger, deps.http));
  installHttpConventions(app, { metrics: deps.metrics });

  // Health: unauthenticated, unversioned, never counted.
  app.get('/healthz', async () => ({ data: { status: 'ok' } }));
  app.get('/readyz', async (request, reply) => {
    const report = await checkReadiness(deps.readiness);
    // Public endpoint: each dependency's state only; the reasons (addresses, errors) go to the log.
    const checks = Object.fromEntries(Object.entries(report.checks).map(([name, c]) => [name, { status: c.status }]));
    if (report.ready && !deps.isShuttingDown()) return { data: { status: 'ready', checks } };
    request.log.warn({ checks: report.checks }, 'not ready');
    return reply
      .code(503)
      .header('retry-after', '1')
      .send(errorBody('SERVICE_UNAVAILABLE', 'The API is not ready.', { checks }));
  });

  // API reference (OpenAPI document and its HTML page): outside /v1, so unauthenticated and never counted.
  registerApiReference(app);

  // Authenticate and count every /v1 request (known route or not) before anything else.
  app.addHook('onRequest', async (request, reply) => {
    if (!(request.url === '/v1' || request.url.startsWith('/v1/') || request.url.startsWith('/v1?'))) return;
    const header = request.headers['x-api-key'];
    const apiKey = typeof header === 'string' ? header : '';
    if (apiKey === '') throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
    const path = request.url.split('?')[0] as string;
    const result = await deps.batcher.authorize(apiKey, request.method, path, path === USAGE_PATH && request.method === 'GET');
    switch (result.decision) {
      case Decision.ALLOWED:
        setRateLimitHeaders(reply, result);
        {
          // Before the body is read: a Free caller gets 403 whatever it sends.
          const refused = tierGate(path, result);
          if (refused) throw refused;
        }
        request.account = { accountId: result.accountId, tier: result.tier, tierRank: result.tierRank };
        request.usageReport = result.usage;
        return;
      case Decision.RATE_LIMITED:
        setRateLimitHeaders(reply, result);
        throw rateLimited(result);
      case Decision.UNAUTHENTICATED:
        throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
      default:
        throw serviceUnavailable('usage', result.retryAfterSeconds || 1);
    }
  });

  const requireAccount = (request: FastifyRequest): AuthenticatedAccount => {
    if (!request.account) throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
    return request.account;
  };

  for (const route of PUBLIC_ROUTES) {
    if (route.target === 'local') continue;
    const upstream = deps.upstreams[route.target];
    app.route({
      method: route.methods,
      url: route.path,
      handler: async (request, reply) => {
        const account = requireAccount(request);
        const header = deps.internalAuth.sign(
          {
            account_id: account.accountId,
            tier: account.tier,
            tier_rank: account.tierRank,
            request_id: request.id,
          },
          // Bound to this one request: the upstream, the method and the path with its query, as forwarded.
          { audience: upstream.name, method: request.method, path: request.url },
        );
        return upstream.forward(request, reply, header);
      },
    });
  }

  app.get(USAGE_PATH, { schema: { querystring: NoQuery, response: { 200: UsageResponseSchema } } }, async (request, reply) => {
    const account = requireAccount(request);
    let u = request.usageReport;
    if (!u) {
      try {
        u = await deps.usage.unary.getUsage(create(GetUsageRequestSchema, { accountId: account.accountId }));
      } catch (err) {
        throw fromGrpcError(err, 'usage');
      }
    }
    const { today, billingPeriod: b } = u;
    if (!today || !b) {
      // Both are always set by the usage service; a report without them is a broken dependency,
      // never a 200 with made-up zeros (the client could take them for its bill).
      request.log.error({ has_today: Boolean(today), has_billing_period: Boolean(b) }, 'usage report incomplete');
      throw serviceUnavailable('usage');
    }
    // Earlier days from the usage service's cache while its store is unreachable (docs/metering.md).
    if (u.stale) reply.header('x-usage-stale', 'true');
    return {
      data: {
        tier: u.tier,
        daily_limit: u.dailyLimit,
        today: { request_count: today.requestCount, remaining: today.remaining, resets_at: today.resetsAt },
        billing_period: {
          start: b.start,
          end: b.end,
          total_requests: Number(b.totalRequests),
          included_requests: Number(b.includedRequests),
          overage_requests: Number(b.overageRequests),
          overage_rate_usd: b.overageRateUsd,
          estimated_overage_usd: b.estimatedOverageUsd,
        },
      },
    };
  });

  // 405 for known paths with another method (with Allow), registered after the real routes.
  for (const route of PUBLIC_ROUTES) {
    const allowed = route.methods.includes('GET') ? [...route.methods, 'HEAD'] : route.methods;
    const others = ALL_METHODS.filter((m) => !allowed.includes(m as never));
    app.route({
      method: others,
      url: route.path,
      handler: async (request) => {
        requireAccount(request);
        throw new AppError(
          'METHOD_NOT_ALLOWED',
          `Method ${request.method} is not allowed on ${route.path}. Allowed: ${allowed.join(', ')}.`,
          {
            headers: { allow: allowed.join(', ') },
          },
        );
      },
    });
  }

  app.setNotFoundHandler(async (request) => {
    throw new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}.`);
  });
  return app;
}
