import {
  AppError,
  clusterFromSettings,
  Env,
  errMessage,
  KeyId,
  listBody,
  pageLimit,
  parseConfig,
  RedisEnv,
  redisOptions,
  redisTargetProblems,
} from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';
import { Redis } from 'ioredis';
import { type AccountKey, DEFAULT_KEY_NAME, parseExpiresAt, parseKeyName, parseRollSeconds } from '../domain/account-keys';
import { auditView, OPERATOR } from '../domain/audit';
import type { AccountStore } from '../store/accounts';
import type { RedisClient } from '../store/counters';

/**
 * `usage-cli keys …`: the operator's key verbs (docs/metering.md, "Accounts, tiers and the admin
 * surface"), the admin API's in a terminal: the same store calls, rules and limits as the
 * account's own, audited with the actor `operator`. A revocation or roll is published on the
 * service's Redis channel (`<prefix>keys:changed`) when the CLI has the service's Redis settings,
 * so every replica drops the account's cached keys at once; without them, within KEY_CACHE_TTL_MS.
 */
type KeyOption = 'account' | 'key' | 'name' | 'expires-at' | 'expires-in-seconds' | 'limit' | 'cursor';

export interface KeyCommand {
  option(name: KeyOption): string | undefined;
  accounts: AccountStore;
  env: Record<string, string | undefined>;
  out(json: unknown, text: string): void;
  warn(text: string): void;
}

function need(c: KeyCommand, name: KeyOption): string {
  const v = c.option(name);
  if (!v) throw new AppError('VALIDATION_ERROR', `--${name} is required`);
  return v;
}

function keyIdOf(c: KeyCommand): KeyId {
  const raw = need(c, 'key');
  const id = KeyId.parse(raw);
  if (!id) throw new AppError('NOT_FOUND', `No such key: ${raw.slice(0, 60)}`);
  return id;
}

function status(k: AccountKey, now: number): string {
  if (k.revokedAt) return `revoked ${k.revokedAt}`;
  if (k.expiresAt) return Date.parse(k.expiresAt) > now ? `expires ${k.expiresAt}` : `expired ${k.expiresAt}`;
  return 'active';
}

const created = (k: AccountKey, apiKey: string) => `${apiKey}\n(key id ${k.id}; shown once, store it now)`;

const KeysRedisEnv = Type.Object({
  REDIS_URL: Type.Optional(Env.url()),
  REDIS_KEY_PREFIX: Type.String({ default: 'fcd:', pattern: '^[A-Za-z0-9:_-]*$' }),
  ...RedisEnv,
});

/**
 * Publishes the account's key change to every usage replica, when the CLI has the service's Redis
 * settings. Best effort, as in the service: the change is made; a message not sent leaves the
 * replicas to the cache's bound (KEY_CACHE_TTL_MS), and says so on stderr.
 */
async function publishKeysChanged(c: KeyCommand, accountId: string): Promise<void> {
  const config = parseConfig(KeysRedisEnv, c.env);
  if (redisTargetProblems(config).length > 0) return;
  const redis: RedisClient =
    clusterFromSettings(config, (scheme) => redisOptions(config, scheme)) ??
    new Redis(config.REDIS_URL as string, {
      ...redisOptions(config, config.REDIS_URL as string),
      maxRetriesPerRequest: 1,
      connectTimeout: 5000,
    });
  redis.on('error', () => undefined);
  try {
    await redis.publish(`${config.REDIS_KEY_PREFIX}keys:changed`, accountId);
  } catch (err) {
    c.warn(`key change not published (${errMessage(err)}); replicas follow within KEY_CACHE_TTL_MS`);
  } finally {
    redis.disconnect();
  }
}

/** Runs `keys <action>`; false for an unknown action. */
export async function keysCommand(action: string | undefined, c: KeyCommand): Promise<boolean> {
  const { keys } = c.accounts;
  const now = Date.now();
  switch (action) {
    case 'create': {
      const name = c.option('name');
      const input = {
        name: name === undefined ? DEFAULT_KEY_NAME : parseKeyName(name),
        expiresAt: parseExpiresAt(c.option('expires-at'), now),
      };
      const { key, apiKey } = await keys.create(need(c, 'account'), input, OPERATOR, now);
      c.out({ ...key, apiKey }, created(key, apiKey));
      return true;
    }
    case 'list': {
      const accountId = need(c, 'account');
      // An unknown account is an error, not an empty list (a mistyped id must not look like "no keys").
      if (!(await c.accounts.accountWithTier(accountId))) throw new AppError('NOT_FOUND', `No such account: ${accountId}`);
      const list = await keys.list(accountId);
      c.out(list, list.map((k) => `${k.id}\t…${k.last4}\t${status(k, now)}\t${k.name}`).join('\n'));
      return true;
    }
    case 'rename': {
      const id = keyIdOf(c);
      const name = parseKeyName(need(c, 'name'));
      const key = await keys.rename(await keys.accountOf(id), id, name, OPERATOR, now);
      c.out(key, `${key.id}\t${key.name}`);
      return true;
    }
    case 'revoke': {
      const id = keyIdOf(c);
      const accountId = await keys.accountOf(id);
      const key = await keys.revoke(accountId, id, OPERATOR, now);
      await publishKeysChanged(c, accountId);
      c.out(key, key.revokedAt ? `${key.id} revoked at ${key.revokedAt}` : `${key.id} ${status(key, now)}`);
      return true;
    }
    case 'roll': {
      const id = keyIdOf(c);
      const raw = need(c, 'expires-in-seconds');
      const seconds = parseRollSeconds(/^\d{1,7}$/.test(raw) ? Number(raw) : Number.NaN);
      const accountId = await keys.accountOf(id);
      const rolled = await keys.roll(accountId, id, seconds, OPERATOR, now);
      await publishKeysChanged(c, accountId);
      c.out(
        { ...rolled.key, apiKey: rolled.apiKey, previous: rolled.old },
        `${created(rolled.key, rolled.apiKey)}\n${rolled.old.id} ${status(rolled.old, now)}`,
      );
      return true;
    }
    case 'audit':
      await auditCommand(c);
      return true;
    default:
      return false;
  }
}

/** `keys audit`: one page of the account's audit log, newest first (JSON: `{ data, pagination }` as the API). */
async function auditCommand(c: KeyCommand): Promise<void> {
  const accountId = need(c, 'account');
  const rawLimit = c.option('limit');
  const limit = pageLimit(rawLimit === undefined ? undefined : /^\d{1,3}$/.test(rawLimit) ? Number(rawLimit) : Number.NaN);
  const cursor = c.option('cursor');
  if (!(await c.accounts.accountWithTier(accountId))) throw new AppError('NOT_FOUND', `No such account: ${accountId}`);
  const page = await c.accounts.keys.auditLog(accountId, { limit, cursor });
  const lines = page.items.map((e) => {
    const actor =
      e.actor.type === 'key'
        ? `key ${e.actor.keyId}`
        : e.actor.type === 'portal_session'
          ? `portal_session ${e.actor.sessionId}`
          : e.actor.type;
    return `${e.occurredAt}\t${e.action}\t${e.targetKeyId}\t${actor}\t${JSON.stringify(e.details)}`;
  });
  if (page.next_cursor) lines.push(`(more: --cursor ${page.next_cursor})`);
  c.out(listBody(page, auditView), lines.join('\n'));
}
