import { type CliIo, createLogger, ManualClock, parseConfig } from '@fcd/service-kit';
import {
  createTestDatabase,
  eventually,
  freePort,
  gatewayEnv,
  type ServiceProcess,
  startService,
  TEST_USAGE_GRPC_SECRET,
  type TestDatabase,
  testUrls,
  uniqueName,
} from '@fcd/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../src/cli';
import { UsageConfigSchema } from '../src/config';
import { startUsage, type UsageService } from '../src/service';

/**
 * Statements from real traffic (docs/metering.md, "Billing close", "Reconciliation"): a gateway
 * process in front of a usage service on an injected clock, requests on both sides of the October →
 * November boundary, then the close, its exports and GET /v1/account/statements.
 */
const ADMIN_TOKEN = 'billing-statements-admin-token-0123456789';
const clock = new ManualClock(Date.parse('2026-10-30T12:00:00Z'));
let db: TestDatabase;
let sql: pg.Client;
let redis: Redis;
let prefix: string;
let usage: UsageService;
let gateway: ServiceProcess;
let base: string;
let admin: string;

beforeAll(async () => {
  db = await createTestDatabase('billing_statements');
  prefix = `${uniqueName('billing_stmt')}:`;
  const grpcPort = await freePort();
  const config = parseConfig(UsageConfigSchema, {
    DATABASE_URL: db.url,
    ...db.env,
    REDIS_URL: testUrls.redis,
    REDIS_KEY_PREFIX: prefix,
    GRPC_PORT: String(grpcPort),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    USAGE_FLUSH_INTERVAL_MS: '200',
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
    ADMIN_TOKEN,
  });
  usage = await startUsage(config, { clock, logger: createLogger({ service: 'usage', level: 'silent' }) });
  admin = `http://127.0.0.1:${usage.httpPort}`;
  gateway = await startService('gateway', await gatewayEnv(grpcPort));
  base = `http://127.0.0.1:${(await gateway.waitForLog((l) => l.msg === 'ready')).port as number}`;
  sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  redis = new Redis(testUrls.redis);
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await usage?.stop();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await sql?.end();
  await db?.drop();
});

/** An account made on 1 September 2026 (its first tier-history row), with one key from the admin API. */
async function account(tier: string, dailyLimit: number | null): Promise<{ id: string; key: string }> {
  const id = `acct_${uniqueName('s')}`;
  await sql.query(
    `INSERT INTO usage.accounts (id, name, tier, daily_limit_override, created_at, updated_at)
     VALUES ($1, $1, $2, $3, '2026-09-01T00:00:00Z', '2026-09-01T00:00:00Z')`,
    [id, tier, dailyLimit],
  );
  const res = await fetch(`${admin}/admin/v1/accounts/${id}/keys`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(res.status).toBe(201);
  return { id, key: ((await res.json()) as { data: { api_key: string } }).data.api_key };
}

/** n requests, one after another; how many were answered 2xx. */
async function traffic(key: string, n: number): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${base}/v1/account/usage`, { headers: { 'x-api-key': key } });
    await res.arrayBuffer();
    if (res.status >= 200 && res.status < 300) ok++;
  }
  return ok;
}

const adminCall = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${admin}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function storedBetween(accountId: string, from: string, to: string): Promise<number> {
  const { rows } = await sql.query<{ n: string }>(
    'SELECT COALESCE(sum(request_count), 0)::text AS n FROM usage.daily_usage WHERE account_id = $1 AND day BETWEEN $2 AND $3',
    [accountId, from, to],
  );
  return Number(rows[0]?.n);
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const env = { DATABASE_URL: db.url, ...db.env };
  const io: CliIo = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env };
  return { code: await run(args, io), stdout, stderr };
}

describe('billing statements from real traffic', () => {
  it('closes October with totals equal to its 2xx answers and exact overage, once, and shows the same figures everywhere', async () => {
    const pro = await account('pro', 20);
    const free = await account('free', null);
    const other = await account('pro', null);
    // October: the Pro account goes 5 over its 20 on the 30th and 10 over on the 31st.
    const october = { pro: await traffic(pro.key, 25), free: await traffic(free.key, 5), other: await traffic(other.key, 3) };
    clock.set('2026-10-31T23:59:50Z');
    october.pro += await traffic(pro.key, 30);
    clock.set('2026-11-01T00:00:10Z');
    const november = { pro: await traffic(pro.key, 7), free: await traffic(free.key, 2) };
    expect(october).toEqual({ pro: 55, free: 5, other: 3 });
    expect(november).toEqual({ pro: 7, free: 2 });

    // Not yet settled: refused with one line, nothing written.
    clock.set('2026-11-01T00:01:00Z');
    const early = await adminCall('POST', '/admin/v1/billing/close', { period: '2026-10' });
    expect(early.status).toBe(400);
    expect(((await early.json()) as { error: { message: string } }).error.message).toBe(
      'period 2026-10 has not ended: it can be closed from 2026-11-01T00:05:00.000Z',
    );
    expect((await sql.query('SELECT 1 FROM usage.statements')).rowCount).toBe(0);
    // Bad input is a 400 envelope naming it, never a 500.
    for (const [method, path, body] of [
      ['POST', '/admin/v1/billing/close', { period: '2026-13' }],
      ['POST', '/admin/v1/billing/close', {}],
      ['GET', '/admin/v1/statements?period=26-10', undefined],
      ['GET', '/admin/v1/statements?period=2026-10&format=xml', undefined],
    ] as const) {
      const res = await adminCall(method, path, body);
      expect({ path, status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code }).toEqual({
        path,
        status: 400,
        code: 'VALIDATION_ERROR',
      });
    }

    clock.set('2026-11-01T00:06:00Z');
    const closed = await adminCall('POST', '/admin/v1/billing/close', { period: '2026-10' });
    expect(closed.status).toBe(200);
    expect(await closed.json()).toMatchObject({ data: { period: '2026-10', accounts: 3, closed: 3, adjusted: 0, unchanged: 0 } });

    const json = (await (await adminCall('GET', '/admin/v1/statements?period=2026-10')).json()) as {
      data: Array<Record<string, unknown> & { account_id: string }>;
    };
    const byId = new Map(json.data.map((s) => [s.account_id, s]));
    expect(byId.get(pro.id)).toEqual({
      account_id: pro.id,
      period: '2026-10',
      tiers: [
        {
          tier: 'pro',
          days: 31,
          daily_limit: 20,
          included_requests: 620,
          overage_requests: 15,
          overage_rate_usd: '0.003',
          amount_usd: '0.045',
        },
      ],
      total_requests: 55,
      included_requests: 620,
      overage_requests: 15,
      overage_rate_usd: '0.003',
      amount_usd: '0.045',
      closed_at: '2026-11-01T00:06:00.000Z',
      adjustments: [],
    });
    // Reconciliation: statement total = stored daily counts of October = the gateway's 2xx answers.
    for (const [a, oct] of [
      [pro, october.pro],
      [free, october.free],
      [other, october.other],
    ] as const) {
      expect(byId.get(a.id)?.total_requests).toBe(oct);
      expect(await storedBetween(a.id, '2026-10-01', '2026-10-31')).toBe(oct);
    }
    expect(byId.get(free.id)).toMatchObject({ included_requests: 3_100, overage_requests: 0, amount_usd: '0.000' });
    expect(await cli(['billing', 'verify', '--period', '2026-10'])).toEqual({
      code: 0,
      stdout: 'verified 2026-10: 3 statements equal the stored daily counts\n',
      stderr: '',
    });

    // A second close changes nothing.
    const again = await adminCall('POST', '/admin/v1/billing/close', { period: '2026-10' });
    expect(await again.json()).toMatchObject({ data: { accounts: 3, closed: 0, adjusted: 0, unchanged: 3 } });
    expect(await (await adminCall('GET', '/admin/v1/statements?period=2026-10')).json()).toEqual(json);

    await sameFiguresEverywhere(json.data, pro, other);
    // Metrics: what this process's closes wrote, and the latest closed month as the database says.
    const metrics = await (await fetch(`http://127.0.0.1:${usage.metricsPort}/metrics`)).text();
    expect(metrics.split('\n').filter((l) => l.startsWith('fcd_billing_'))).toEqual([
      `fcd_billing_last_closed_period_end_timestamp_seconds{service="usage"} ${Date.parse('2026-11-01T00:00:00Z') / 1000}`,
      'fcd_billing_last_closed_statements{service="usage"} 3',
      'fcd_billing_last_closed_amount_usd{service="usage"} 0.045',
      'fcd_billing_statements_closed_total{outcome="closed",service="usage"} 3',
      'fcd_billing_statements_closed_total{outcome="unchanged",service="usage"} 3',
      'fcd_billing_closed_amount_usd_total{service="usage"} 0.045',
    ]);
    // November's requests are November's: stored once flushed (with the Pro account's one
    // GET /v1/account/statements, itself counted), never in October's statement.
    const novemberPro = november.pro + 1;
    expect(
      await eventually(
        () => storedBetween(pro.id, '2026-11-01', '2026-11-30'),
        (n) => n === novemberPro,
      ),
    ).toBe(novemberPro);
  });
});

/** The CSV and JSON Lines exports and GET /v1/account/statements carry the JSON's figures; an account sees only its own. */
async function sameFiguresEverywhere(
  data: Array<Record<string, unknown> & { account_id: string }>,
  pro: { id: string; key: string },
  other: { id: string; key: string },
): Promise<void> {
  const csvRes = await adminCall('GET', '/admin/v1/statements?period=2026-10', undefined, { accept: 'text/csv' });
  expect(csvRes.headers.get('content-type')).toBe('text/csv; charset=utf-8');
  const rows = (await csvRes.text()).trimEnd().split('\r\n');
  expect(rows[0]).toBe('kind,account_id,period,tiers,total_requests,included_requests,overage_requests,overage_rate_usd,amount_usd,at');
  expect(rows.slice(1)).toEqual(
    data.map((s) =>
      [
        'statement',
        s.account_id,
        '2026-10',
        (s.tiers as Array<{ tier: string; days: number }>).map((t) => `${t.tier}:${t.days}`).join(';'),
        s.total_requests,
        s.included_requests,
        s.overage_requests,
        s.overage_rate_usd,
        s.amount_usd,
        s.closed_at,
      ].join(','),
    ),
  );
  const jsonl = await (await adminCall('GET', '/admin/v1/statements?period=2026-10&format=jsonl')).text();
  expect(
    jsonl
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l)),
  ).toEqual(data);
  const fromCli = await cli(['billing', 'statements', '--period', '2026-10', '--format', 'csv']);
  expect(fromCli.stdout).toBe(rows.map((r) => `${r}\r\n`).join(''));

  for (const a of [pro, other]) {
    const res = await fetch(`${base}/v1/account/statements`, { headers: { 'x-api-key': a.key } });
    expect(res.status).toBe(200);
    const { account_id: _, ...own } = data.find((s) => s.account_id === a.id) as Record<string, unknown>;
    expect(await res.json()).toEqual({ data: [own] });
  }
}
