import { type AccountClaims, fieldProblems, gatewayAccounts, type InternalAuth, methodNotAllowed } from '@fcd/service-kit';
import type { Static } from '@sinclair/typebox';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance, FastifyRequest, FastifySchemaCompiler } from 'fastify';
import type { WebhookService } from '../subscriptions/webhooks';
import {
  CreateBody,
  DeliveryEnvelope,
  DeliveryList,
  type DeliveryParams,
  type IdParams,
  ListQuery,
  NoQuery,
  PatchBody,
  RecoverBody,
  RecoveryEnvelope,
  RotateBody,
  SubscriptionEnvelope,
  SubscriptionList,
  shapeOnly,
} from './schemas';

export interface WebhookRoutesOptions {
  service: WebhookService;
  internalAuth: InternalAuth;
}

/**
 * Bodies are validated without type coercion (the shared Fastify options
 * coerce, which suits query strings but would turn 123 into "123"), with every
 * error collected and attached to the request, so the handler can merge them
 * with the domain's checks into one VALIDATION_ERROR.
 */
const strictAjv = new Ajv({ allErrors: true, coerceTypes: false, useDefaults: false, removeAdditional: false, strict: false });
addFormats(strictAjv);
// Against the body's shape only: its content rules are domain/validation.ts's (see schemas.ts).
const strictBodyCompiler: FastifySchemaCompiler<unknown> = ({ schema }) => strictAjv.compile(shapeOnly(schema) as object);

/**
 * Route options of a POST whose JSON body may be left out: no body is validated as `{}`, with
 * the strict compiler, and problems are collected for the service (schemaProblems).
 */
const OPTIONAL_BODY = {
  validatorCompiler: strictBodyCompiler,
  attachValidation: true,
  preValidation: async (request: FastifyRequest) => {
    if (request.body == null) request.body = {};
  },
} as const;

function schemaProblems(request: FastifyRequest) {
  const err = request.validationError as (Error & { validation?: unknown; validationContext?: string }) | undefined;
  if (!err) return [];
  if (!Array.isArray(err.validation)) throw err;
  return fieldProblems(err.validation, err.validationContext ?? 'body');
}

/** The verified caller of a request (`GatewayAccounts.claims`). */
type Caller = (request: FastifyRequest) => AccountClaims;

/** Create, list, read, change and delete subscriptions. */
function subscriptionRoutes(app: FastifyInstance, service: WebhookService, account: Caller): void {
  app.post<{ Body: Static<typeof CreateBody> }>(
    '/v1/webhooks',
    {
      schema: { body: CreateBody, querystring: NoQuery, response: { 201: SubscriptionEnvelope } },
      validatorCompiler: strictBodyCompiler,
      attachValidation: true,
    },
    async (request, reply) => {
      const created = await service.create(account(request), request.body, schemaProblems(request));
      return reply.code(201).send({ data: created });
    },
  );

  app.get<{ Querystring: Static<typeof ListQuery> }>(
    '/v1/webhooks',
    { schema: { querystring: ListQuery, response: { 200: SubscriptionList } } },
    async (request) => service.list(account(request), request.query.limit, request.query.cursor),
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    '/v1/webhooks/:id',
    { schema: { querystring: NoQuery, response: { 200: SubscriptionEnvelope } } },
    async (request) => ({ data: await service.get(account(request), request.params.id) }),
  );

  app.patch<{ Params: Static<typeof IdParams>; Body: Static<typeof PatchBody> }>(
    '/v1/webhooks/:id',
    {
      schema: { body: PatchBody, querystring: NoQuery, response: { 200: SubscriptionEnvelope } },
      validatorCompiler: strictBodyCompiler,
      attachValidation: true,
    },
    async (request) => ({ data: await service.update(account(request), request.params.id, request.body, schemaProblems(request)) }),
  );

  app.delete<{ Params: Static<typeof IdParams> }>('/v1/webhooks/:id', { schema: { querystring: NoQuery } }, async (request, reply) => {
    await service.delete(account(request), request.params.id);
    return reply.code(204).send();
  });
}

/** A subscription's deliveries and actions: list, retry, test, rotate the secret, recover. */
function actionRoutes(app: FastifyInstance, service: WebhookService, account: Caller): void {
  app.get<{ Params: Static<typeof IdParams>; Querystring: Static<typeof ListQuery> }>(
    '/v1/webhooks/:id/deliveries',
    { schema: { querystring: ListQuery, response: { 200: DeliveryList } } },
    async (request) => service.listDeliveries(account(request), request.params.id, request.query.limit, request.query.cursor),
  );

  app.post<{ Params: Static<typeof DeliveryParams> }>(
    '/v1/webhooks/:id/deliveries/:delivery_id/retry',
    { schema: { querystring: NoQuery, response: { 202: DeliveryEnvelope } } },
    async (request, reply) => {
      const delivery = await service.retryDelivery(account(request), request.params.id, request.params.delivery_id);
      return reply.code(202).send({ data: delivery });
    },
  );

  app.post<{ Params: Static<typeof IdParams> }>(
    '/v1/webhooks/:id/test',
    { schema: { querystring: NoQuery, response: { 202: DeliveryEnvelope } } },
    async (request, reply) => reply.code(202).send({ data: await service.sendTest(account(request), request.params.id) }),
  );

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof RotateBody> | undefined }>(
    '/v1/webhooks/:id/rotate-secret',
    {
      schema: { body: RotateBody, querystring: NoQuery, response: { 200: SubscriptionEnvelope } },
      // No body rotates at once (no overlap).
      ...OPTIONAL_BODY,
    },
    async (request) => ({
      data: await service.rotateSecret(account(request), request.params.id, request.body ?? undefined, schemaProblems(request)),
    }),
  );

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof RecoverBody> | undefined }>(
    '/v1/webhooks/:id/recover',
    {
      schema: { body: RecoverBody, querystring: NoQuery, response: { 202: RecoveryEnvelope } },
      // No body: `since` is missing, a VALIDATION_ERROR naming it.
      ...OPTIONAL_BODY,
    },
    async (request, reply) =>
      reply.code(202).send({ data: await service.recover(account(request), request.params.id, request.body, schemaProblems(request)) }),
  );
}

/** /v1/webhooks and /v1/webhooks/{id}: authenticated by the gateway's signed header, Pro and above. */
export async function webhookRoutes(app: FastifyInstance, options: WebhookRoutesOptions): Promise<void> {
  const { service, internalAuth } = options;
  const accounts = gatewayAccounts(internalAuth, 'webhook');
  app.addHook('onRequest', accounts.verify);
  app.addHook('onRequest', accounts.requirePro('Webhooks'));
  subscriptionRoutes(app, service, accounts.claims);
  actionRoutes(app, service, accounts.claims);
  methodNotAllowed(app, '/v1/webhooks', ['GET', 'POST']);
  methodNotAllowed(app, '/v1/webhooks/:id/recover', ['POST']);
  methodNotAllowed(app, '/v1/webhooks/:id/deliveries', ['GET']);
  methodNotAllowed(app, '/v1/webhooks/:id/deliveries/:delivery_id/retry', ['POST']);
  methodNotAllowed(app, '/v1/webhooks/:id/test', ['POST']);
  methodNotAllowed(app, '/v1/webhooks/:id/rotate-secret', ['POST']);
  methodNotAllowed(app, '/v1/webhooks/:id', ['GET', 'PATCH', 'DELETE']);
}
