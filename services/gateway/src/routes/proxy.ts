import type { InternalAuth } from '@fcd/service-kit';
import { methodNotAllowed } from '@fcd/service-kit';
import type { FastifyInstance } from 'fastify';
import { requireAccount } from '../auth/account';
import type { Upstream } from '../clients/proxy';
import type { IdempotencyStore } from '../http/idempotency';
import { idempotent } from '../http/idempotent';
import { ALL_METHODS, PUBLIC_ROUTES, type Target } from './table';

/** The public routes answered by a domain service: signed, forwarded, a POST with an Idempotency-Key kept. */
export function registerProxyRoutes(
  app: FastifyInstance,
  deps: {
    upstreams: Record<Exclude<Target, 'local'>, Upstream>;
    internalAuth: InternalAuth;
    idempotency: IdempotencyStore;
    idempotencyWaitMs: number;
  },
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

/** 405 for known paths with another method (with Allow), after authentication; registered after the real routes. */
export function registerMethodNotAllowed(app: FastifyInstance): void {
  for (const route of PUBLIC_ROUTES) {
    methodNotAllowed(app, route.path, route.methods, {
      methods: ALL_METHODS,
      before: async (request) => {
        requireAccount(request);
      },
    });
  }
}
