import { AppError } from '@fcd/service-kit';
import type { FastifyInstance } from 'fastify';
import { type GatewayDeps, requireAccount } from '../app';
import { idempotent } from '../http/idempotent';
import { ALL_METHODS, PUBLIC_ROUTES } from './table';

/** The public routes answered by a domain service: signed, forwarded, a POST with an Idempotency-Key kept. */
export function registerProxyRoutes(
  app: FastifyInstance,
  deps: Pick<GatewayDeps, 'upstreams' | 'internalAuth' | 'idempotency' | 'idempotencyWaitMs'>,
): void {
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
          return idempotent(deps.idempotency, deps.idempotencyWaitMs, request, reply, account, idempotencyKey, () =>
            upstream.call(request, header, method),
          );
        }
        return upstream.forward(request, reply, header, method);
      },
    });
  }
}

/** 405 for known paths with another method (with Allow); registered after the real routes. */
export function registerMethodNotAllowed(app: FastifyInstance): void {
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
}
