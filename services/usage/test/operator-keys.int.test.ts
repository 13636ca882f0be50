import { type CliIo, createLogger, createPool, ManualClock, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase, testUrls, uniqueName } from '@fcd/testing';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../src/cli';
import { KeyCache } from '../src/domain/key-cache';
import { buildUsageHttpApp } from '../src/http/app';
import { createUsageMetrics } from '../src/metrics';
import { AccountStore } from '../src/store/accounts';
import { migrations, USAGE_SCHEMA } from '../src/store/migrations';

/**
 * The operator's key verbs: the admin API and the CLI run the account's own rules (10 live keys),
 * audit each change with the actor `operator`, and drop the account's cached keys on every replica
 * after a revocation or a roll (the admin API through the service's publisher, the CLI on Redis).
 */

const TOKEN = 'usage-admin-token-0123456789abcdefghijklmn';
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const logger = createLogger({ service: 'usage-operator-keys-test', level: 'silent' });
let db: TestDatabase;
let pool: Pool;
let app: FastifyInstance;
let accounts: AccountStore;
const clock = new ManualClock(T0);
const published: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('usage_operator_keys');
  pool = createPool({ connectionString: db.url, applicationName: 'test', logger });
  await migrate(pool, USAGE_SCHEMA, migrations);
  accounts = new AccountStore(pool);
  app = buildUsageHttpApp({
    logger,
    metrics: createUsageMetrics(),
    accounts,
    cache: new KeyCache(clock, 1000, 1000),
    keysChanged: async (accountId) => void published.push(accountId),
    checks: {},
    adminToken: TOKEN,
    clock,
    isShuttingDown: () => false,
  });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await pool?.end();
  await db?.drop();
});

const admin = async (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) => {
  const res = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${TOKEN}` },
    ...(payload === undefined ? {} : { payload }),
  });
  return { status: res.statusCode, body: res.json() };
};

async function auditOf(accountId: string) {
  const { rows } = await pool.query<{
    actor_type: string;
    actor_key_id: string | null;
    action: string;
    target_key_id: string;
    details: unknown;
  }>('SELECT actor_type, actor_key_id, action, target_key_id, details FROM usage.audit_log WHERE account_id = $1 ORDER BY seq', [
    accountId,
  ]);
  return rows.map((r) => [r.actor_type, r.actor_key_id, r.action, r.target_key_id, r.details]);
}

describe('admin API key verbs', () => {
  it('creates, lists, renames, rolls and revokes (the last live key too), each audited as the operator', async () => {
    const account = await accounts.createAccount({ name: 'ops', tier: 'free' });
    const created = await admin('POST', `/admin/v1/accounts/${account.id}/keys`, { name: 'ops', expires_at: '2026-12-01T00:00:00+01:00' });
    expect(created.status).toBe(201);
    const key = created.body.data;
    expect(key).toEqual({
      id: expect.stringMatching(/^key_/),
      account_id: account.id,
      name: 'ops',
      prefix: key.api_key.slice(0, 8),
      last4: key.api_key.slice(-4),
      created_at: expect.any(String),
      last_used_at: null,
      expires_at: '2026-11-30T23:00:00.000Z',
      revoked_at: null,
      api_key: expect.stringMatching(/^fcd_[A-Za-z0-9]{32}$/),
    });
    const plain = await admin('POST', `/admin/v1/accounts/${account.id}/keys`);
    expect([plain.status, plain.body.data.name, plain.body.data.expires_at]).toEqual([201, 'default', null]);

    const renamed = await admin('PATCH', `/admin/v1/keys/${key.id}`, { name: 'ops 2' });
    expect([renamed.status, renamed.body.data.name]).toEqual([200, 'ops 2']);
    clock.set(T0 + 1000);
    const rolled = await admin('POST', `/admin/v1/keys/${key.id}/roll`, { expires_in_seconds: 60 });
    expect(rolled.status).toBe(201);
    expect([rolled.body.data.name, rolled.body.data.expires_at, rolled.body.data.previous.expires_at]).toEqual([
      'ops 2',
      '2026-11-30T23:00:00.000Z',
      '2026-11-22T08:01:01.000Z',
    ]);
    expect(published).toEqual([account.id]);

    // The operator may revoke the account's last live key (the account itself may not).
    for (const id of [plain.body.data.id, key.id, rolled.body.data.id]) {
      const revoked = await admin('POST', `/admin/v1/keys/${id}/revoke`);
      expect([revoked.status, revoked.body.data.revoked_at]).toEqual([200, '2026-11-22T08:00:01.000Z']);
    }
    expect(published).toEqual([account.id, account.id, account.id, account.id]);
    const list = await admin('GET', `/admin/v1/accounts/${account.id}/keys`);
    expect(list.body.data.map((k: { name: string; revoked_at: string | null }) => [k.name, k.revoked_at !== null])).toEqual([
      ['ops 2', true],
      ['default', true],
      ['ops 2', true],
    ]);

    const rolledId = rolled.body.data.id;
    expect(await auditOf(account.id)).toEqual([
      ['operator', null, 'key.created', key.id, { name: 'ops', expires_at: '2026-11-30T23:00:00.000Z' }],
      ['operator', null, 'key.created', plain.body.data.id, { name: 'default', expires_at: null }],
      ['operator', null, 'key.renamed', key.id, { name: 'ops 2', previous_name: 'ops' }],
      ['operator', null, 'key.rolled', key.id, { name: 'ops 2', new_key_id: rolledId, expires_in_seconds: 60 }],
      ['operator', null, 'key.revoked', plain.body.data.id, { name: 'default', was_live: true }],
      ['operator', null, 'key.revoked', key.id, { name: 'ops 2', was_live: true }],
      ['operator', null, 'key.revoked', rolledId, { name: 'ops 2', was_live: true }],
    ]);

    const page = await admin('GET', `/admin/v1/accounts/${account.id}/audit-log?limit=2`);
    expect(page.body.data.map((e: { action: string; key_id: string; actor: unknown }) => [e.action, e.key_id, e.actor])).toEqual([
      ['key.revoked', rolledId, { type: 'operator' }],
      ['key.revoked', key.id, { type: 'operator' }],
    ]);
    expect(page.body.pagination).toEqual({ limit: 2, next_cursor: expect.any(String), has_more: true });
    const next = await admin('GET', `/admin/v1/accounts/${account.id}/audit-log?limit=5&cursor=${page.body.pagination.next_cursor}`);
    expect(next.body.data.map((e: { action: string }) => e.action)).toEqual([
      'key.revoked',
      'key.rolled',
      'key.renamed',
      'key.created',
      'key.created',
    ]);
    expect(next.body.pagination).toEqual({ limit: 5, next_cursor: null, has_more: false });
    clock.set(T0);
  });

  it('keeps the limit of 10 live keys and refuses bad input, writing nothing', async () => {
    const account = await accounts.createAccount({ name: 'full', tier: 'pro' });
    for (let i = 0; i < 10; i++) expect((await admin('POST', `/admin/v1/accounts/${account.id}/keys`, { name: `k${i}` })).status).toBe(201);
    const before = await auditOf(account.id);
    const eleventh = await admin('POST', `/admin/v1/accounts/${account.id}/keys`, { name: 'k10' });
    expect([eleventh.status, eleventh.body.error.code, eleventh.body.error.details]).toEqual([409, 'LIMIT_REACHED', { limit: 10 }]);
    const cases: Array<[string, string, Record<string, unknown> | undefined, number, string]> = [
      ['POST', `/admin/v1/accounts/${account.id}/keys`, { name: 'x', colour: 'red' }, 400, 'VALIDATION_ERROR'],
      ['POST', `/admin/v1/accounts/${account.id}/keys`, { expires_at: '2026-11-22T07:00:00Z' }, 400, 'VALIDATION_ERROR'],
      ['POST', '/admin/v1/accounts/acct_missing/keys', { name: 'x' }, 404, 'NOT_FOUND'],
      ['PATCH', '/admin/v1/keys/key_00000000-0000-4000-8000-000000000000', { name: 'x' }, 404, 'NOT_FOUND'],
      ['PATCH', '/admin/v1/keys/not-a-key', { name: 'x' }, 404, 'NOT_FOUND'],
      ['POST', '/admin/v1/keys/key_00000000-0000-4000-8000-000000000000/roll', { expires_in_seconds: 1 }, 404, 'NOT_FOUND'],
      ['GET', '/admin/v1/accounts/acct_missing/audit-log', undefined, 404, 'NOT_FOUND'],
      ['GET', `/admin/v1/accounts/${account.id}/audit-log?cursor=abc`, undefined, 400, 'VALIDATION_ERROR'],
    ];
    for (const [method, url, payload, status, code] of cases) {
      const res = await admin(method as 'GET', url, payload);
      expect({ url, status: res.status, code: res.body.error?.code }).toEqual({ url, status, code });
    }
    const key = (await admin('GET', `/admin/v1/accounts/${account.id}/keys`)).body.data[0];
    const bad = await admin('POST', `/admin/v1/keys/${key.id}/roll`, { expires_in_seconds: 604_801 });
    expect([bad.status, bad.body.error.details]).toEqual([
      400,
      { fields: [{ field: 'expires_in_seconds', message: 'must be an integer from 0 to 604800' }] },
    ]);
    expect(await auditOf(account.id)).toEqual(before);
  });
});

describe('CLI key verbs', () => {
  it('runs the same verbs, audited as the operator, and publishes revocations and rolls on Redis', async () => {
    const prefix = `${uniqueName('opkeys')}:`;
    const subscriber = new Redis(testUrls.redis);
    const messages: string[] = [];
    subscriber.on('message', (_channel: string, accountId: string) => messages.push(accountId));
    await subscriber.subscribe(`${prefix}keys:changed`);
    const cli = async (args: string[]) => {
      let stdout = '';
      let stderr = '';
      const io: CliIo = {
        stdout: { write: (t: string) => (stdout += t) },
        stderr: { write: (t: string) => (stderr += t) },
        env: { DATABASE_URL: db.url, REDIS_URL: testUrls.redis, REDIS_KEY_PREFIX: prefix },
      };
      const code = await run([...args, '--json'], io);
      expect({ args, code, stderr }).toEqual({ args, code: 0, stderr: '' });
      return JSON.parse(stdout);
    };
    try {
      const account = await accounts.createAccount({ name: 'cli', tier: 'pro' });
      const a = await cli(['keys', 'create', '--account', account.id, '--name', 'ci', '--expires-at', '2099-01-01T00:00:00Z']);
      expect([a.name, a.expiresAt, a.accountId]).toEqual(['ci', '2099-01-01T00:00:00.000Z', account.id]);
      const b = await cli(['keys', 'create', '--account', account.id]);
      expect((await cli(['keys', 'rename', '--key', a.id, '--name', 'deploy'])).name).toBe('deploy');
      const rolled = await cli(['keys', 'roll', '--key', a.id, '--expires-in-seconds', '0']);
      expect([rolled.name, rolled.expiresAt, rolled.previous.id, rolled.previous.revokedAt !== null]).toEqual([
        'deploy',
        '2099-01-01T00:00:00.000Z',
        a.id,
        true,
      ]);
      expect((await cli(['keys', 'revoke', '--key', b.id])).revokedAt).not.toBeNull();
      expect((await cli(['keys', 'list', '--account', account.id])).map((k: { id: string }) => k.id)).toEqual([a.id, b.id, rolled.id]);
      expect((await auditOf(account.id)).map(([type, keyId, action, target]) => [type, keyId, action, target])).toEqual([
        ['operator', null, 'key.created', a.id],
        ['operator', null, 'key.created', b.id],
        ['operator', null, 'key.renamed', a.id],
        ['operator', null, 'key.rolled', a.id],
        ['operator', null, 'key.revoked', b.id],
      ]);
      const audit = await cli(['keys', 'audit', '--account', account.id, '--limit', '2']);
      expect(audit.data.map((e: { action: string; key_id: string; actor: unknown }) => [e.action, e.key_id, e.actor])).toEqual([
        ['key.revoked', b.id, { type: 'operator' }],
        ['key.rolled', a.id, { type: 'operator' }],
      ]);
      expect(audit.pagination).toEqual({ limit: 2, next_cursor: expect.any(String), has_more: true });
      const rest = await cli(['keys', 'audit', '--account', account.id, '--cursor', audit.pagination.next_cursor]);
      expect([rest.data.map((e: { action: string }) => e.action), rest.pagination.has_more]).toEqual([
        ['key.renamed', 'key.created', 'key.created'],
        false,
      ]);
      // Published after the roll and the revocation; a sentinel on the channel shows nothing else came.
      const publisher = new Redis(testUrls.redis);
      await publisher.publish(`${prefix}keys:changed`, 'sentinel');
      publisher.disconnect();
      await expect.poll(() => messages.at(-1)).toBe('sentinel');
      expect(messages).toEqual([account.id, account.id, 'sentinel']);
    } finally {
      subscriber.disconnect();
    }
  });
});
