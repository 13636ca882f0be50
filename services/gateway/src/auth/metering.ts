import { type AuthorizeResult, Decision } from '@fcd/proto';
import { AppError, errorBody, serviceUnavailable, UNAUTHORIZED_MESSAGE } from '@fcd/service-kit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { cacheControl, ifNoneMatchMatches, strongEtag } from '../http/conditional';
import { requestCredential } from '../portal/credential';
import { maxAgeOf, TIER_GATED_PREFIXES } from '../routes/table';
import type { AuthorizationBatcher } from './batcher';

export const USAGE_PATH = '/v1/account/usage';

/**
 * The path authorization decides on: the route the router matched (its pattern), else the
 * canonical path (no route: a 404, or a 405 under a gated prefix), never the raw request target.
 * `request.url` is already canonical (auth/canonical-path.ts, run before routing).
 */
function routedPath(request: FastifyRequest): string {
  return request.routeOptions.url ?? (request.url.split('?')[0] as string);
}

/** 403 when the routed path lies under a tier-gated prefix the account's tier does not reach. */
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

/** GET or HEAD with If-None-Match: authorized with a peek, counted later unless the answer is 304 (`route`: the routed path). */
function isConditional(request: FastifyRequest, route: string): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  if (request.headers['if-none-match'] === undefined) return false;
  // Exports stream and are counted per 1,000 rows: never conditional.
  return !(route === '/v1/exports' || route.startsWith('/v1/exports/'));
}

/** The 429 of an authorization over the daily limit (also an export's resume line, ./routes/export-walk.ts). */
export function rateLimited(r: AuthorizeResult): AppError {
  return new AppError(
    'RATE_LIMIT_EXCEEDED',
    `Daily request limit of ${r.dailyLimit} requests exceeded. The limit resets at ${r.resetsAt}.`,
    { details: { limit: r.dailyLimit, remaining: 0, resets_at: r.resetsAt }, retryAfterSeconds: r.retryAfterSeconds },
  );
}

/**
 * Counts a conditional GET that was authorized with a peek (its answer is not a 304). Throws the
 * error that replaces the answer when it cannot be counted: no answer but a 304 leaves uncounted.
 */
export async function countNow(
  batcher: AuthorizationBatcher,
  request: FastifyRequest,
  reply: FastifyReply,
  includeUsage: boolean,
): Promise<AuthorizeResult> {
  const pending = request.uncounted;
  if (!pending) throw new Error('countNow without a pending count');
  request.uncounted = undefined;
  const r = await batcher.authorize(pending.apiKey, request.method, pending.path, includeUsage);
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
}

/**
 * What an authorization means for the request: its headers and account are set, or the error that
 * answers it is returned (or thrown).
 */
function admit(
  request: FastifyRequest,
  reply: FastifyReply,
  apiKey: string,
  target: { path: string; route: string },
  conditional: boolean,
  result: AuthorizeResult,
): AppError | undefined {
  switch (result.decision) {
    case Decision.ALLOWED: {
      setRateLimitHeaders(reply, result);
      if (conditional) request.uncounted = { apiKey, path: target.path };
      request.meterKey = apiKey;
      // Before the body is read: a Free caller gets 403 whatever it sends.
      const refused = tierGate(target.route, result);
      if (refused) return refused;
      request.account = {
        accountId: result.accountId,
        tier: result.tier,
        tierRank: result.tierRank,
        keyId: result.keyId,
        sessionId: result.sessionId,
      };
      request.usageReport = result.usage;
      return undefined;
    }
    case Decision.RATE_LIMITED:
      setRateLimitHeaders(reply, result);
      return rateLimited(result);
    case Decision.UNAUTHENTICATED:
      return new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
    default:
      return serviceUnavailable('usage', result.retryAfterSeconds || 1);
  }
}

/**
 * Authenticates and counts every /v1 request (known route or not) before anything else. A hook
 * with `done` rather than an async one: the request goes on from the authorization's own `then`
 * (no async function's promise and extra microtask hops per request).
 */
function installAuthentication(app: FastifyInstance, batcher: AuthorizationBatcher): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (!(request.url === '/v1' || request.url.startsWith('/v1/') || request.url.startsWith('/v1?'))) {
      done();
      return;
    }
    // X-API-Key, else the portal's session cookie (its writes checked for CSRF first, uncounted when refused).
    const apiKey = requestCredential(request);
    if (apiKey instanceof AppError) {
      done(apiKey);
      return;
    }
    // The canonical path labels the count; the routed path decides the gate and the metering class.
    const path = request.url.split('?')[0] as string;
    const route = routedPath(request);
    const conditional = isConditional(request, route);
    batcher.authorize(apiKey, request.method, path, route === USAGE_PATH && request.method === 'GET', conditional).then((result) => {
      let error: unknown;
      try {
        error = admit(request, reply, apiKey, { path, route }, conditional, result);
      } catch (err) {
        error = err;
      }
      done(error as Error | undefined);
    }, done);
  });
}

/**
 * Every 200 to a GET/HEAD under /v1 carries a strong ETag of its bytes and a private Cache-Control;
 * a conditional GET naming the current tag becomes a 304 (no body, not counted); any other answer
 * to a conditional GET is counted here, before it is sent (docs/metering.md, "Conditional GETs").
 */
function installConditionalAnswers(app: FastifyInstance, batcher: AuthorizationBatcher): void {
  // With `done` rather than async: only a conditional GET's answer waits (for its count).
  app.addHook('onSend', (request, reply, payload, done) => {
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
        done(null, '');
        return;
      }
    }
    if (!request.uncounted) {
      done(null, payload);
      return;
    }
    // As Fastify does for an async hook's payload: a throw while sending it is the answer's error.
    const send = (next: unknown) => {
      try {
        done(null, next);
      } catch (err) {
        done(err as Error);
      }
    };
    countNow(batcher, request, reply, false).then(
      () => send(payload),
      (err: unknown) => {
        let refusal: string;
        try {
          // The answer is replaced by the refusal: a conditional GET is never answered uncounted but by a 304.
          const appError = err instanceof AppError ? err : serviceUnavailable('usage', 1, err);
          for (const h of ['etag', 'cache-control', 'location', 'link', 'allow', 'x-usage-stale']) reply.removeHeader(h);
          if (appError.retryAfterSeconds !== undefined) reply.header('retry-after', String(appError.retryAfterSeconds));
          reply.code(appError.status);
          reply.header('content-type', 'application/json; charset=utf-8');
          refusal = JSON.stringify(errorBody(appError.code, appError.message, appError.details));
        } catch (thrown) {
          done(thrown as Error);
          return;
        }
        send(refusal);
      },
    );
  });
}

/** The metering of /v1: authentication, tier gates, rate-limit headers, conditional GETs. */
export function installMetering(app: FastifyInstance, batcher: AuthorizationBatcher): void {
  installAuthentication(app, batcher);
  installConditionalAnswers(app, batcher);
}
