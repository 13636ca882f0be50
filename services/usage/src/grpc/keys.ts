import { create } from '@bufbuild/protobuf';
import {
  type Actor,
  ActorType,
  type ApiKey,
  ApiKeySchema,
  type CreateKeyRequest,
  type CreateKeyResponse,
  CreateKeyResponseSchema,
  type ListKeysRequest,
  type ListKeysResponse,
  ListKeysResponseSchema,
  type RenameKeyRequest,
  type RenameKeyResponse,
  RenameKeyResponseSchema,
  type RevokeKeyRequest,
  type RevokeKeyResponse,
  RevokeKeyResponseSchema,
  type RollKeyRequest,
  type RollKeyResponse,
  RollKeyResponseSchema,
} from '@fcd/proto';
import { AppError, KeyId } from '@fcd/service-kit';
import { type AccountKey, keyNotFound, parseExpiresAt, parseKeyName, parseRollSeconds } from '../domain/account-keys';
import type { AuditActor } from '../domain/audit';
import type { UsageMeter } from '../meter/index';
import type { AccountStore } from '../store/accounts';

/**
 * The account's own key management over gRPC (the gateway's /v1/account/keys routes). The gateway
 * validates first; the same rules run here so no caller can store what the API would refuse.
 * After a change the account's cached keys are dropped (`meter.keysChanged`). Every change names
 * its actor, the key or portal session that authenticated the call, and is audited (store/account-keys.ts).
 */
export function keyHandlers({ keys }: AccountStore, meter: UsageMeter) {
  const account = (id: string) => {
    if (!id) throw new AppError('VALIDATION_ERROR', 'account_id is required.');
    return id;
  };
  const keyId = (id: string) => {
    const parsed = KeyId.parse(id);
    if (!parsed) throw keyNotFound(id);
    return parsed;
  };
  return {
    async listKeys(request: ListKeysRequest): Promise<ListKeysResponse> {
      return create(ListKeysResponseSchema, { keys: (await keys.list(account(request.accountId))).map(toApiKey) });
    },
    async createKey(request: CreateKeyRequest): Promise<CreateKeyResponse> {
      const now = meter.now();
      const input = { name: parseKeyName(request.name), expiresAt: parseExpiresAt(request.expiresAt, now) };
      const { key, apiKey } = await keys.create(account(request.accountId), input, actorOf(request.actor), now);
      return create(CreateKeyResponseSchema, { key: toApiKey(key), apiKey });
    },
    async renameKey(request: RenameKeyRequest): Promise<RenameKeyResponse> {
      const name = parseKeyName(request.name);
      const key = await keys.rename(account(request.accountId), keyId(request.keyId), name, actorOf(request.actor), meter.now());
      return create(RenameKeyResponseSchema, { key: toApiKey(key) });
    },
    async revokeKey(request: RevokeKeyRequest): Promise<RevokeKeyResponse> {
      const accountId = account(request.accountId);
      const key = await keys.revoke(accountId, keyId(request.keyId), actorOf(request.actor), meter.now());
      await meter.keysChanged(accountId);
      return create(RevokeKeyResponseSchema, { key: toApiKey(key) });
    },
    async rollKey(request: RollKeyRequest): Promise<RollKeyResponse> {
      const accountId = account(request.accountId);
      const seconds = parseRollSeconds(request.expiresInSeconds);
      const rolled = await keys.roll(accountId, keyId(request.keyId), seconds, actorOf(request.actor), meter.now());
      await meter.keysChanged(accountId);
      return create(RollKeyResponseSchema, { key: toApiKey(rolled.key), apiKey: rolled.apiKey, previous: toApiKey(rolled.old) });
    },
  };
}

/** A portal session's public id (`pses_<uuid>`, portal/store.ts). */
const SESSION_ID = /^pses_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The actor of a change over gRPC: the key or the portal session that authenticated the call. An
 * operator acts through the admin API or the CLI, never here. Without one the caller is a gateway
 * older than the audit log (a rollout under way): UNAVAILABLE, nothing written, so the client
 * retries on a newer one.
 */
function actorOf(actor: Actor | undefined): AuditActor {
  if (actor?.type === ActorType.PORTAL_SESSION && SESSION_ID.test(actor.sessionId))
    return { type: 'portal_session', sessionId: actor.sessionId };
  const keyId = actor?.type === ActorType.KEY ? KeyId.parse(actor.keyId) : undefined;
  if (!keyId)
    throw new AppError(
      'SERVICE_UNAVAILABLE',
      'A key change must name its actor (ACTOR_TYPE_KEY with key_id, ACTOR_TYPE_PORTAL_SESSION with session_id).',
      { retryAfterSeconds: 1 },
    );
  return { type: 'key', keyId };
}

function toApiKey(k: AccountKey): ApiKey {
  return create(ApiKeySchema, {
    id: k.id,
    name: k.name,
    createdAt: k.createdAt,
    ...(k.prefix === null ? {} : { prefix: k.prefix }),
    ...(k.lastUsedAt === null ? {} : { lastUsedAt: k.lastUsedAt }),
    ...(k.expiresAt === null ? {} : { expiresAt: k.expiresAt }),
    ...(k.revokedAt === null ? {} : { revokedAt: k.revokedAt }),
  });
}
