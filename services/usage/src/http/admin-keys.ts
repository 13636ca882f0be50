import { AppError, KeyId, listBody, Nullable, PageQuery, Pagination, validationError } from '@fcd/service-kit';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { type AccountKey, DEFAULT_KEY_NAME, parseExpiresAt, parseKeyName, parseRollSeconds } from '../domain/account-keys';
import { auditView, OPERATOR } from '../domain/audit';
import type { AccountStore } from '../store/accounts';

/**
 * The operator's key verbs on the admin API (docs/metering.md, "Accounts, tiers and the admin
 * surface"): the account's own verbs (list, create, rename, revoke, roll) with the same domain
 * rules and limits, audited with the actor `operator`, and the account's audit log. A revocation
 * or roll drops the account's cached keys on every replica (`keysChanged`). Unlike the account,
 * an operator may revoke the account's last live key (domain/audit.ts, `mayRevokeLastLiveKey`).
 */
export interface AdminKeyDeps {
  accounts: AccountStore;
  now: () => number;
  keysChanged: (accountId: string) => Promise<void>;
}

const KeyOut = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  prefix: Nullable(Type.String()),
  last4: Type.String(),
  created_at: Type.String(),
  last_used_at: Nullable(Type.String()),
  expires_at: Nullable(Type.String()),
  revoked_at: Nullable(Type.String()),
});
const CreatedOut = Type.Object({ ...KeyOut.properties, api_key: Type.String() });
const AuditOut = Type.Object({
  id: Type.String(),
  actor: Type.Object({ type: Type.String(), key_id: Type.Optional(Type.String()) }),
  action: Type.String(),
  key_id: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
  occurred_at: Type.String(),
});
const AccountParams = Type.Object({ id: Type.String() });
const AuditQuery = Type.Object(PageQuery, { additionalProperties: false });
const AuditPage = Type.Object({ data: Type.Array(AuditOut), pagination: Pagination });

function operatorKeyView(k: AccountKey): Static<typeof KeyOut> {
  return {
    id: k.id,
    account_id: k.accountId,
    name: k.name,
    prefix: k.prefix,
    last4: k.last4,
    created_at: k.createdAt,
    last_used_at: k.lastUsedAt,
    expires_at: k.expiresAt,
    revoked_at: k.revokedAt,
  };
}

/** A body's fields, refusing any but `allowed` (400 naming each); an absent body is `{}`. */
function bodyOf(body: unknown, allowed: string[]): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((f) => !allowed.includes(f));
  if (unknown.length > 0) throw validationError(unknown.map((field) => ({ field, message: 'is not a known field' })));
  return fields;
}

/** The key of a path; a malformed id is 404 like an unknown one. */
function keyIdOf(id: string): KeyId {
  const parsed = KeyId.parse(id);
  if (!parsed) throw new AppError('NOT_FOUND', `No such key: ${id.slice(0, 60)}`);
  return parsed;
}

export function registerAdminKeyRoutes(admin: FastifyInstance, deps: AdminKeyDeps): void {
  const { keys } = deps.accounts;
  admin.post(
    '/admin/v1/accounts/:id/keys',
    { schema: { params: AccountParams, response: { 201: Type.Object({ data: CreatedOut }) } } },
    async (request, reply) => {
      const { id } = request.params as { id: string };
      const body = bodyOf(request.body, ['name', 'expires_at']);
      const now = deps.now();
      const input = {
        name: body.name === undefined ? DEFAULT_KEY_NAME : parseKeyName(body.name),
        expiresAt: parseExpiresAt(body.expires_at, now),
      };
      const { key, apiKey } = await keys.create(id, input, OPERATOR, now);
      return reply.code(201).send({ data: { ...operatorKeyView(key), api_key: apiKey } });
    },
  );
  admin.get(
    '/admin/v1/accounts/:id/keys',
    { schema: { params: AccountParams, response: { 200: Type.Object({ data: Type.Array(KeyOut) }) } } },
    async (request) => {
      const { id } = request.params as { id: string };
      // An unknown account is an error, not an empty list (a mistyped id must not look like "no keys").
      if (!(await deps.accounts.accountWithTier(id))) throw new AppError('NOT_FOUND', `No such account: ${id}`);
      return { data: (await keys.list(id)).map(operatorKeyView) };
    },
  );
  admin.patch(
    '/admin/v1/keys/:id',
    { schema: { params: AccountParams, response: { 200: Type.Object({ data: KeyOut }) } } },
    async (request) => {
      const keyId = keyIdOf((request.params as { id: string }).id);
      const name = parseKeyName(bodyOf(request.body, ['name']).name);
      return { data: operatorKeyView(await keys.rename(await keys.accountOf(keyId), keyId, name, OPERATOR, deps.now())) };
    },
  );
  admin.post(
    '/admin/v1/keys/:id/revoke',
    { schema: { params: AccountParams, response: { 200: Type.Object({ data: KeyOut }) } } },
    async (request) => {
      const keyId = keyIdOf((request.params as { id: string }).id);
      const accountId = await keys.accountOf(keyId);
      const key = await keys.revoke(accountId, keyId, OPERATOR, deps.now());
      await deps.keysChanged(accountId);
      return { data: operatorKeyView(key) };
    },
  );
  admin.post(
    '/admin/v1/keys/:id/roll',
    {
      schema: {
        params: AccountParams,
        response: { 201: Type.Object({ data: Type.Object({ ...CreatedOut.properties, previous: KeyOut }) }) },
      },
    },
    async (request, reply) => {
      const keyId = keyIdOf((request.params as { id: string }).id);
      const seconds = parseRollSeconds(bodyOf(request.body, ['expires_in_seconds']).expires_in_seconds);
      const accountId = await keys.accountOf(keyId);
      const rolled = await keys.roll(accountId, keyId, seconds, OPERATOR, deps.now());
      await deps.keysChanged(accountId);
      return reply
        .code(201)
        .send({ data: { ...operatorKeyView(rolled.key), api_key: rolled.apiKey, previous: operatorKeyView(rolled.old) } });
    },
  );
  admin.get(
    '/admin/v1/accounts/:id/audit-log',
    { schema: { params: AccountParams, querystring: AuditQuery, response: { 200: AuditPage } } },
    async (request) => {
      const { id } = request.params as { id: string };
      if (!(await deps.accounts.accountWithTier(id))) throw new AppError('NOT_FOUND', `No such account: ${id}`);
      const page = await keys.auditLog(id, request.query as Static<typeof AuditQuery>);
      return listBody(page, auditView);
    },
  );
}
