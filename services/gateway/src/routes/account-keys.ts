import { create } from '@bufbuild/protobuf';
import { fromGrpcError, type TypedClient } from '@fcd/grpc';
import {
  ActorType,
  type ApiKey,
  CreateKeyRequestSchema,
  ListKeysRequestSchema,
  RenameKeyRequestSchema,
  RevokeKeyRequestSchema,
  RollKeyRequestSchema,
  type UsageService,
} from '@fcd/proto';
import { AppError, ERROR_STATUS, errorBody, KeyId, keyNameProblem, validationError } from '@fcd/service-kit';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type AuthenticatedAccount, requireAccount } from '../auth/account';
import type { IdempotencyStore, StoredAnswer } from '../http/idempotency';
import { idempotent } from '../http/idempotent';
import {
  CreatedKeyResponse,
  CreateKeyBody,
  KeyListResponse,
  KeyParams,
  KeyResponse,
  RenameKeyBody,
  RolledKeyResponse,
  RollKeyBody,
} from './account-keys-schema';
import { NoQuery } from './usage-schema';

const ACCOUNT_KEYS_PATH = '/v1/account/keys';

export interface AccountKeyDeps {
  usage: TypedClient<typeof UsageService>;
  idempotency: IdempotencyStore;
  idempotencyWaitMs: number;
}

/** The public view of a key (never the key itself). */
function view(k: ApiKey | undefined) {
  if (!k)
    throw new AppError('SERVICE_UNAVAILABLE', 'The service is temporarily unavailable (usage). Retry after 1 s.', { retryAfterSeconds: 1 });
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix ?? null,
    created_at: k.createdAt,
    last_used_at: k.lastUsedAt ?? null,
    expires_at: k.expiresAt ?? null,
    revoked_at: k.revokedAt ?? null,
  };
}

/** A name's rule, service-kit's (the schema says its length; control characters it cannot say as plainly). */
function checkName(name: string): void {
  const problem = keyNameProblem(name);
  if (problem) throw validationError([{ field: 'name', message: problem }]);
}

/** Any RFC 3339 spelling the schema accepts (an offset, a lower-case `t`) is sent on as ISO UTC; in the future. */
function expiresAtOf(value: string | null | undefined): string | undefined {
  const expiresMs = value == null ? undefined : Date.parse(value);
  if (expiresMs !== undefined && !(expiresMs > Date.now()))
    throw validationError([{ field: 'expires_at', message: 'must be a date-time in the future' }]);
  return expiresMs === undefined ? undefined : new Date(expiresMs).toISOString();
}

/** The key id of the path; a malformed one is 404 like an unknown one (never a 400 revealing the shape). */
function keyIdOf(params: Static<typeof KeyParams>): KeyId {
  const id = KeyId.parse(params.key_id);
  if (!id) throw new AppError('NOT_FOUND', 'No API key with this id in this account.');
  return id;
}

async function call<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    // The error's code and details (`limit`, `live_keys`, `fields`) travel over gRPC (libs/grpc).
    throw fromGrpcError(err, 'usage');
  }
}

/**
 * Who makes a change, for the audit log: the portal session that authenticated the call (even one
 * made from a key: the change was made in the portal), else the key.
 */
function actorOf(account: AuthenticatedAccount) {
  if (account.sessionId) return { type: ActorType.PORTAL_SESSION, sessionId: account.sessionId };
  // A usage service older than the audit log names no key; it cannot record the change either.
  if (!account.keyId)
    throw new AppError('SERVICE_UNAVAILABLE', 'The service is temporarily unavailable (usage). Retry after 1 s.', { retryAfterSeconds: 1 });
  return { type: ActorType.KEY, keyId: account.keyId };
}

/**
 * A POST's answer, through the Idempotency-Key store when the client sent one (docs/api.md,
 * "Idempotent POSTs"): an answer below 500 (a 201, a 409) is kept and replayed.
 */
async function answerPost(
  deps: AccountKeyDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  account: AuthenticatedAccount,
  work: () => Promise<unknown>,
): Promise<unknown> {
  const idempotencyKey = request.headers['idempotency-key'];
  if (idempotencyKey === undefined) {
    const body = await work();
    reply.code(201);
    return body;
  }
  return idempotent(deps.idempotency, deps.idempotencyWaitMs, request, reply, account, idempotencyKey, async (): Promise<StoredAnswer> => {
    const json = (status: number, body: unknown): StoredAnswer => ({
      status,
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: Buffer.from(JSON.stringify(body)),
    });
    try {
      return json(201, await work());
    } catch (err) {
      if (err instanceof AppError && ERROR_STATUS[err.code] < 500)
        return json(ERROR_STATUS[err.code], errorBody(err.code, err.message, err.details));
      throw err;
    }
  });
}

/**
 * The account's own API keys, every tier (docs/api.md, "API keys"): list, create, rename, revoke,
 * roll. Authenticated and counted like any /v1 request (docs/metering.md); the usage service
 * applies the rules (10 live keys, never the last live key) and drops its cached keys.
 */
export function registerAccountKeyRoutes(app: FastifyInstance, deps: AccountKeyDeps): void {
  const { usage } = deps;
  app.get(ACCOUNT_KEYS_PATH, { schema: { querystring: NoQuery, response: { 200: KeyListResponse } } }, async (request) => {
    const { accountId } = requireAccount(request);
    const { keys } = await call(() => usage.unary.listKeys(create(ListKeysRequestSchema, { accountId })));
    return { data: keys.map(view) };
  });

  app.post<{ Body: Static<typeof CreateKeyBody> }>(
    ACCOUNT_KEYS_PATH,
    { schema: { body: CreateKeyBody, response: { 201: CreatedKeyResponse } } },
    async (request, reply) => {
      const account = requireAccount(request);
      const { name } = request.body;
      checkName(name);
      const expires_at = expiresAtOf(request.body.expires_at);
      return answerPost(deps, request, reply, account, async () => {
        const created = await call(() =>
          usage.unary.createKey(
            create(CreateKeyRequestSchema, {
              accountId: account.accountId,
              name,
              ...(expires_at === undefined ? {} : { expiresAt: expires_at }),
              actor: actorOf(account),
            }),
          ),
        );
        return { data: { ...view(created.key), key: created.apiKey } };
      });
    },
  );

  app.patch<{ Params: Static<typeof KeyParams>; Body: Static<typeof RenameKeyBody> }>(
    `${ACCOUNT_KEYS_PATH}/:key_id`,
    { schema: { params: KeyParams, body: RenameKeyBody, response: { 200: KeyResponse } } },
    async (request) => {
      const account = requireAccount(request);
      const keyId = keyIdOf(request.params);
      checkName(request.body.name);
      const { accountId } = account;
      const { key } = await call(() =>
        usage.unary.renameKey(create(RenameKeyRequestSchema, { accountId, keyId, name: request.body.name, actor: actorOf(account) })),
      );
      return { data: view(key) };
    },
  );

  app.delete<{ Params: Static<typeof KeyParams> }>(
    `${ACCOUNT_KEYS_PATH}/:key_id`,
    { schema: { params: KeyParams } },
    async (request, reply) => {
      const account = requireAccount(request);
      const keyId = keyIdOf(request.params);
      await call(() =>
        usage.unary.revokeKey(create(RevokeKeyRequestSchema, { accountId: account.accountId, keyId, actor: actorOf(account) })),
      );
      return reply.code(204).send();
    },
  );

  app.post<{ Params: Static<typeof KeyParams>; Body: Static<typeof RollKeyBody> }>(
    `${ACCOUNT_KEYS_PATH}/:key_id/roll`,
    { schema: { params: KeyParams, body: RollKeyBody, response: { 201: RolledKeyResponse } } },
    async (request, reply) => {
      const account = requireAccount(request);
      const keyId = keyIdOf(request.params);
      const expiresInSeconds = request.body.expires_in_seconds;
      return answerPost(deps, request, reply, account, async () => {
        const rolled = await call(() =>
          usage.unary.rollKey(
            create(RollKeyRequestSchema, { accountId: account.accountId, keyId, expiresInSeconds, actor: actorOf(account) }),
          ),
        );
        return { data: { ...view(rolled.key), key: rolled.apiKey, previous: view(rolled.previous) } };
      });
    },
  );
}
