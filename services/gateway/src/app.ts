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
  validationError,
} from '@fcd/service-kit';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { AuthorizationBatcher } from './auth/batcher';
import { sendAnswer, type Upstream } from './clients/proxy';
import { cacheControl, ifNoneMatchMatches, strongEtag } from './http/conditional';
import { IDEMPOTENCY_KEY_PATTERN, IdempotencyStore, type StoredAnswer } from './http/idempotency';
import { registerApiReference } from './openapi';
import { registerExports } from './routes/exports';
import { ALL_METHODS, maxAgeOf, PUBLIC_ROUTES, type Target, TIER_GATED_PREFIXES } from './routes/table';
import { NoQuery, UsageResponseSchema } from './routes/usage-schema';

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

const USAGE_PATH = '/v1/account/usage';

/** 403 when the path lies under a tier-gated prefix the account's tier does not reach. */
function tierGate(path: string, result: AuthorizeResult): AppError | undefined {
  for (const gate of TIER_GATED_PREFIXES) {
    if (path !== gate.prefix && !path.startsWith(`${gate.prefix}/`)) continue;
    if (result.tierRank >= gate.minTierRank) return undefined;
    return new AppError('FORBIDDEN', `${gate.feature} are available on the Pro tier and above. Upgrade the account to use them.`, {
      details: { required_tier: gate.requiredTier, tier: result.tier },
    });
  }
  return undefined;
}

const RATE_LIMIT_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];

function setRateLimitHeaders(reply: FastifyReply, r: AuthorizeResult): void {
  reply.header('x-ratelimit-limit', String(r.dailyLimit));
  reply.header('x-ratelimit-remaining', String(r.remaining));
  reply.header('x-ratelimit-reset', r.resetsAt);
}

/** GET or HEAD with If-None-Match: authorized with a peek, counted later unless the answer is 304. */
function isConditional(request: FastifyRequest, path: string): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  if (request.headers['if-none-match'] === undefined) return false;
  // Exports stream and are counted per 1,000 rows: never conditional.
  return !(path === '/v1/exports' || path.startsWith('/v1/exports/'));
}

/** The public usage report (docs/metering.md "Usage report"), or undefined when the usage service's answer lacks a part. */
function usageBody(u: GetUsageResponse) {
  const { today, billingPeriod: b } = u;
  if (!today || !b) return undefined;
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
    const conditional = isConditional(request, path);
    const result = await deps.batcher.authorize(apiKey, request.method, path, path === USAGE_PATH && request.method === 'GET', conditional);
    switch (result.decision) {
      case Decision.ALLOWED:
        setRateLimitHeaders(reply, result);
        if (conditional) request.uncounted = { apiKey, path };
        request.meterKey = apiKey;
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

  /**
   * Counts a conditional GET that was authorized with a peek (its answer is not a 304). Throws the
   * error that replaces the answer when it cannot be counted: no answer but a 304 leaves uncounted.
   */
  const countNow = async (request: FastifyRequest, reply: FastifyReply, includeUsage: boolean): Promise<AuthorizeResult> => {
    const pending = request.uncounted;
    if (!pending) throw new Error('countNow without a pending count');
    request.uncounted = undefined;
    const r = await deps.batcher.authorize(pending.apiKey, request.method, pending.path, includeUsage);
    switch (r.decision) {
      case Decision.ALLOWED:
        setRateLimitHeaders(reply, r);
        return r;
      case Decision.RATE_LIMITED:
        setRateLimitHeaders(reply, r);
        throw rateLimited(r);
      case Decision.UNAUTHENTICATED:
        for (const h of RATE_LIMIT_HEADERS) reply.removeHeader(h);
        throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
      default:
        throw serviceUnavailable('usage', r.retryAfterSeconds || 1);
    }
  };

  // Every 200 to a GET/HEAD under /v1 carries a strong ETag of its bytes and a private Cache-Control;
  // a conditional GET naming the current tag becomes a 304 (no body, not counted); any other answer
  // to a conditional GET is counted here, before it is sent (docs/metering.md, "Conditional GETs").
  app.addHook('onSend', async (request, reply, payload) => {
    if (
      request.account &&
      (request.method === 'GET' || request.method === 'HEAD') &&
      reply.statusCode === 200 &&
      (typeof payload === 'string' || Buffer.isBuffer(payload))
    ) {
      const etag = strongEtag(payload);
      reply.header('etag', etag);
      reply.header('cache-control', cacheControl(maxAgeOf(request.routeOptions.url)));
      if (request.uncounted && ifNoneMatchMatches(request.headers['if-none-match'], etag)) {
        request.uncounted = undefined;
        reply.code(304);
        reply.removeHeader('content-type');
        reply.removeHeader('content-length');
        return '';
      }
    }
    if (!request.uncounted) return payload;
    try {
      await countNow(request, reply, false);
      return payload;
    } catch (err) {
      // The answer is replaced by the refusal: a conditional GET is never answered uncounted but by a 304.
      const appError = err instanceof AppError ? err : serviceUnavailable('usage', 1, err);
      for (const h of ['etag', 'cache-control', 'location', 'link', 'allow', 'x-usage-stale']) reply.removeHeader(h);
      if (appError.retryAfterSeconds !== undefined) reply.header('retry-after', String(appError.retryAfterSeconds));
      reply.code(appError.status);
      reply.header('content-type', 'application/json; charset=utf-8');
      return JSON.stringify(errorBody(appError.code, appError.message, appError.details));
    }
  });

  /**
   * A POST with an Idempotency-Key (every POST route, whatever the upstream): the first request with
   * a key does the work and its answer is kept 24 h; the same key with the same request replays that
   * answer byte for byte without doing the work again; with another request it is 422. A duplicate
   * that arrives while the first is still working waits for its answer (409 after idempotencyWaitMs).
   * The request was authenticated and counted before (a replay counts like any request).
   */
  const idempotent = async (
    request: FastifyRequest,
    reply: FastifyReply,
    account: AuthenticatedAccount,
    header: string | string[],
    work: () => Promise<StoredAnswer>,
  ): Promise<FastifyReply> => {
    const value = Array.isArray(header) ? undefined : header;
    if (value === undefined || !IDEMPOTENCY_KEY_PATTERN.test(value)) {
      throw validationError([{ field: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters, sent once' }]);
    }
    const body = request.body === undefined || request.body === null ? undefined : JSON.stringify(request.body);
    const fingerprint = IdempotencyStore.fingerprint(request.method, request.url, body);
    const key = deps.idempotency.redisKey(account.accountId, value);
    const store = async <T>(op: () => Promise<T>): Promise<T> => {
      try {
        return await op();
      } catch (err) {
        request.log.warn({ err: { message: (err as Error).message } }, 'idempotency store unavailable');
        throw serviceUnavailable('idempotency store', 1, err);
      }
    };
    const waitUntil = Date.now() + deps.idempotencyWaitMs;
    for (let delay = 20; ; delay = Math.min(delay * 2, 250)) {
      const begun = await store(() => deps.idempotency.begin(key, fingerprint));
      if (begun.kind === 'mismatch') {
        throw new AppError(
          'IDEMPOTENCY_KEY_REUSED',
          'This Idempotency-Key was used with another request (method, path or body) in the last 24 hours. Use a new key for a new request.',
        );
      }
      if (begun.kind === 'replay') {
        reply.header('idempotent-replayed', 'true');
        return sendAnswer(reply, begun.answer);
      }
      if (begun.kind === 'run') {
        let answer: StoredAnswer;
        try {
          answer = await work();
        } catch (err) {
          // No answer from the upstream (unreachable, failed): the key is free for a retry.
          await deps.idempotency.release(key, begun.token).catch(() => undefined);
          throw err;
        }
        if (answer.status >= 500) {
          await deps.idempotency.release(key, begun.token).catch(() => undefined);
        } else {
          try {
            if (!(await deps.idempotency.complete(key, fingerprint, begun.token, answer))) {
              request.log.warn('idempotency lease expired before the answer was stored');
            }
          } catch (err) {
            // The work is done: the client gets its answer; a retry within the lease waits, then may run again.
            request.log.error({ err: { message: (err as Error).message } }, 'idempotency answer not stored');
          }
        }
        return sendAnswer(reply, answer);
      }
      // In progress elsewhere: wait for its answer.
      if (Date.now() + delay > waitUntil) {
        throw new AppError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still being processed. Retry shortly.', {
          retryAfterSeconds: 1,
        });
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  };

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
        // HEAD is answered from the GET (Fastify drops the body), so its ETag is the GET's.
        const method = request.method === 'HEAD' ? 'GET' : request.method;
        const header = deps.internalAuth.sign(
          {
            account_id: account.accountId,
            tier: account.tier,
            tier_rank: account.tierRank,
            request_id: request.id,
          },
          // Bound to this one request: the upstream, the method and the path with its query, as forwarded.
          { audience: upstream.name, method, path: request.url },
        );
        const idempotencyKey = request.headers['idempotency-key'];
        if (method === 'POST' && idempotencyKey !== undefined) {
          return idempotent(request, reply, account, idempotencyKey, () => upstream.call(request, header, method));
        }
        return upstream.forward(request, reply, header, method);
      },
    });
  }

  app.get(USAGE_PATH, { schema: { querystring: NoQuery, response: { 200: UsageResponseSchema } } }, async (request, reply) => {
    const account = requireAccount(request);
    let u = request.usageReport;
    if (request.uncounted && u) {
      // A conditional GET of the report is peeked, so the report shows today's count without this
      // request. Unchanged since the client's copy → 304 (the onSend hook), uncounted; changed →
      // counted now, and the report includes this request like any other.
      const peeked = usageBody(u);
      if (peeked && ifNoneMatchMatches(request.headers['if-none-match'], strongEtag(reply.serialize(peeked) as string))) return peeked;
      u = (await countNow(request, reply, true)).usage;
    }
    if (!u) {
      try {
        u = await deps.usage.unary.getUsage(create(GetUsageRequestSchema, { accountId: account.accountId }));
      } catch (err) {
        throw fromGrpcError(err, 'usage');
      }
    }
    const body = usageBody(u);
    if (!body) {
      // Today and the billing period are always set by the usage service; a report without them is a
      // broken dependency, never a 200 with made-up zeros (the client could take them for its bill).
      request.log.error({ has_today: Boolean(u.today), has_billing_period: Boolean(u.billingPeriod) }, 'usage report incomplete');
      throw serviceUnavailable('usage');
    }
    // Earlier days from the usage service's cache while its store is unreachable (docs/metering.md).
    if (u.stale) reply.header('x-usage-stale', 'true');
    return body;
  });

  registerExports(app, {
    facility: deps.upstreams.facility,
    internalAuth: deps.internalAuth,
    batcher: deps.batcher,
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
