import {
  type AccountClaims,
  INTERNAL_AUTH_HEADER,
  type InternalAuth,
  methodNotAllowed,
  requestTarget,
  unauthorized,
} from '@fcd/service-kit';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { EventsService } from '../domain/events';
import { EventEnvelopeResponse, EventList, EventsQuery } from './event-schemas';
import { type IdParams, NoQuery } from './schemas';

export interface EventRoutesOptions {
  events: EventsService;
  internalAuth: InternalAuth;
}

/**
 * GET /v1/events and GET /v1/events/{id}: authenticated by the gateway's signed header, open to
 * every tier (events are public data). The handlers send JSON text built around the stored
 * envelopes (domain/events.ts); the response schemas document it.
 */
export async function eventRoutes(app: FastifyInstance, options: EventRoutesOptions): Promise<void> {
  const { events, internalAuth } = options;
  /** The verified caller of each request (`subscription_id` must be one of its subscriptions). */
  const accounts = new WeakMap<FastifyRequest, AccountClaims>();

  app.addHook('onRequest', (request, _reply, done) => {
    const claims = internalAuth.verify(request.headers[INTERNAL_AUTH_HEADER], requestTarget(request, 'webhook'));
    if (!claims) return done(unauthorized());
    accounts.set(request, claims);
    done();
  });
  const account = (request: FastifyRequest): AccountClaims => {
    const claims = accounts.get(request);
    if (!claims) throw unauthorized();
    return claims;
  };

  app.get<{ Querystring: Static<typeof EventsQuery> }>(
    '/v1/events',
    { schema: { querystring: EventsQuery, response: { 200: EventList } } },
    async (request, reply) => reply.type('application/json; charset=utf-8').send(await events.list(account(request), request.query)),
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    '/v1/events/:id',
    { schema: { querystring: NoQuery, response: { 200: EventEnvelopeResponse } } },
    async (request, reply) => reply.type('application/json; charset=utf-8').send(await events.get(request.params.id)),
  );

  methodNotAllowed(app, '/v1/events', ['GET']);
  methodNotAllowed(app, '/v1/events/:id', ['GET']);
}
