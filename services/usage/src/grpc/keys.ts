import { create } from '@bufbuild/protobuf';
import {
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
import type { UsageMeter } from '../meter/index';
import type { AccountStore } from '../store/accounts';

/**
 * The account's own key management over gRPC (the gateway's /v1/account/keys routes). The gateway
 * validates first; the same rules run here so no caller can store what the API would refuse.
 * After a change the account's cached keys are dropped (`meter.keysChanged`).
 */
export function keyHandlers(accounts: AccountStore, meter: UsageMeter) {
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
      return create(ListKeysResponseSchema, { keys: (await accounts.accountKeys(account(request.accountId))).map(toApiKey) });
    },
    async createKey(request: CreateKeyRequest): Promise<CreateKeyResponse> {
      const now = meter.now();
      const input = { name: parseKeyName(request.name), expiresAt: parseExpiresAt(request.expiresAt, now) };
      const { key, apiKey } = await accounts.createAccountKey(account(request.accountId), input, now);
      return create(CreateKeyResponseSchema, { key: toApiKey(key), apiKey });
    },
    async renameKey(request: RenameKeyRequest): Promise<RenameKeyResponse> {
      const key = await accounts.renameAccountKey(account(request.accountId), keyId(request.keyId), parseKeyName(request.name));
      return create(RenameKeyResponseSchema, { key: toApiKey(key) });
    },
    async revokeKey(request: RevokeKeyRequest): Promise<RevokeKeyResponse> {
      const accountId = account(request.accountId);
      const key = await accounts.revokeAccountKey(accountId, keyId(request.keyId), meter.now());
      await meter.keysChanged(accountId);
      return create(RevokeKeyResponseSchema, { key: toApiKey(key) });
    },
    async rollKey(request: RollKeyRequest): Promise<RollKeyResponse> {
      const accountId = account(request.accountId);
      const seconds = parseRollSeconds(request.expiresInSeconds);
      const rolled = await accounts.rollAccountKey(accountId, keyId(request.keyId), seconds, meter.now());
      await meter.keysChanged(accountId);
      return create(RollKeyResponseSchema, { key: toApiKey(rolled.key), apiKey: rolled.apiKey, previous: toApiKey(rolled.old) });
    },
  };
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
