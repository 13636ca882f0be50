import { gatewayAccounts, type InternalAuth, methodNotAllowed } from '@fcd/service-kit';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
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
  // The verified caller of each request (`subscription_id` must be one of its subscriptions).
  const accounts = gatewayAccounts(internalAuth, 'webhook');
  app.addHook('onRequest', accounts.verify);
  const account = accounts.claims;

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
