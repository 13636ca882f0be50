import { createLogger, createPool, ManualClock, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyCache } from '../src/domain/key-cache';
import { buildUsageHttpApp } from '../src/http/app';
import { createUsageMetrics } from '../src/metrics';
import { AccountStore } from '../src/store/accounts';
import { migrations, USAGE_SCHEMA } from '../src/store/migrations';

/** The usage service's admin API behind its bearer token (requireBearerToken from service-kit). */

const TOKEN = 'usage-admin-token-0123456789abcdefghijklmn';
const logger = createLogger({ service: 'usage-admin-test', level: 'silent' });
let db: TestDatabase;
let pool: Pool;
let app: FastifyInstance;

beforeAll(async () => {
  db = await createTestDatabase('usage_admin');
  pool = createPool({ connectionString: db.url, applicationName: 'test', logger });
  await migrate(pool, USAGE_SCHEMA, migrations);
  app = buildUsageHttpApp({
    logger,
    metrics: createUsageMetrics(),
    accounts: new AccountStore(pool),
    cache: new KeyCache(new ManualClock(0), 1000, 1000),
    checks: {},
    adminToken: TOKEN,
    isShuttingDown: () => false,
  });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await pool?.end();
  await db?.drop();
});

const unauthorized = { error: { code: 'UNAUTHORIZED', message: 'A valid admin token is required in the Authorization header.' } };

describe('usage admin API authentication', () => {
  it('creates and lists accounts with the admin token', async () => {
    const created = await app.inject({
      method: 'POST',
      url: '/admin/v1/accounts',
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: { name: 'admin test', tier: 'pro' },
    });
    expect(created.statusCode).toBe(201);
    expect(created.json().data).toMatchObject({ name: 'admin test', tier: 'pro', daily_limit: 25_000 });
    const list = await app.inject({ method: 'GET', url: '/admin/v1/accounts', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(list.json().data.map((a: { name: string }) => a.name)).toEqual(['admin test']);
  });

  it.each([
    ['a non-ASCII token as long as the real one (it answered 500)', `Bearer ${'é'.repeat(TOKEN.length)}`],
    ['a wrong token of the same length', `Bearer ${'x'.repeat(TOKEN.length)}`],
    ['a shorter token', `Bearer ${TOKEN.slice(0, 10)}`],
    ['a longer token', `Bearer ${TOKEN}0`],
    ['another scheme', `Basic ${TOKEN}`],
    ['no token', undefined],
  ])('answers %s with the same 401 envelope and writes nothing', async (_label, authorization) => {
    const res = await app.inject({
      method: 'POST',
      url: '/admin/v1/accounts',
      headers: authorization === undefined ? {} : { authorization },
      payload: { name: 'intruder', tier: 'enterprise' },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual(unauthorized);
    const { rows } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM usage.accounts WHERE name = 'intruder'");
    expect(rows[0]?.n).toBe(0);
  });
});
