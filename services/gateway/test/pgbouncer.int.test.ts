import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { createLogger, createPool, migrate, withTransaction } from '@fcd/service-kit';
import {
  type ApiStack,
  createPooledTestDatabase,
  eventually,
  type PgBouncer,
  repoRoot,
  type ServiceProcess,
  startApiStack,
  startPgBouncer,
  startService,
  TEST_USAGE_GRPC_SECRET,
  type TestDatabase,
  testUrls,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { webhookMigrations } from '@fcd/webhooks';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Bus, openBus, Receiver, SECRET_KEY, testCertificate } from '../../dispatcher/test/helpers';
import { migrations as facilityMigrations } from '../../facility/src/store/migrations';
import { download1, F, writeDownload } from '../../facility/test/echo-fixtures';
import { migrations as usageMigrations } from '../../usage/src/store/migrations';

/**
 * ADR 0013 (docs/operations.md, "PgBouncer"): the whole system through PgBouncer in `pool_mode = transaction`,
 * with 3 server connections shared by every service and CLI (libs/testing/src/pgbouncer.ts;
 * PgBouncer accepts no `options` or `statement_timeout` startup parameter, as in production).
 * Every process runs with DATABASE_URL at PgBouncer and DATABASE_POOL_MODE=transaction.
 *
 * The subset of the suite it covers, every service's queries:
 * - migrations of usage, facility and webhook at start-up (and 4 concurrent migrators of one
 *   schema: each migration applied exactly once, under the transaction-scoped lock);
 * - CLIs: `migrate` of usage, webhook and facility; usage `accounts create` / `keys create`;
 *   webhook `deactivate-account`; facility `seed`, `simulate` and `sync-echo`
 *   (an ECHO download: COPY into temp tables, the sync lock held in an open transaction; a second
 *   sync refused while the lock is held);
 * - statement_timeout and the facility search_path set in every transaction (SET LOCAL);
 * - metering: a Free key gets exactly 100 of 130 concurrent requests, all 100 stored in Postgres;
 *   the usage report (GET /v1/account/usage);
 * - facility reads (list, one facility, its violations, search by place: the extension functions
 *   found through SET LOCAL search_path) and ingestion (POST /internal/v1/ingest);
 * - webhook subscriptions: create, list, get, update, delete;
 * - the outbox relay and the dispatcher: an ingested violation delivered once, signed;
 * - no session state leaks: a fresh connection through PgBouncer has the default search_path.
 * Not covered here: the fault tests (Postgres outages) and the rest of the suite, which run directly.
 */
const run = promisify(execFile);
const facilityCli = resolve(repoRoot, 'services/facility/dist/cli.js');
const webhookCli = resolve(repoRoot, 'services/webhook/dist/cli.js');
const stream = uniqueName('PGB').toUpperCase();
let bouncer: PgBouncer;
let database: TestDatabase;
let db: pg.Pool;
let stack: ApiStack;
let dispatcher: ServiceProcess | undefined;
let receiver: Receiver;
let bus: Bus;
let cert: ReturnType<typeof testCertificate>;

beforeAll(async () => {
  bouncer = await startPgBouncer({ poolSize: 3 });
  database = await createPooledTestDatabase('pgbouncer', bouncer);
  // Assertions read through PgBouncer too (schema-qualified SQL, no session state).
  db = new pg.Pool({ connectionString: database.url, max: 2 });
  cert = testCertificate();
  receiver = new Receiver(cert);
  await receiver.start();
  bus = await openBus(stream);
  stack = await startApiStack({
    label: 'pgbouncer',
    database,
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  dispatcher = await startService('dispatcher', {
    DATABASE_URL: database.url,
    ...database.env,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DISPATCHER_CONSUMER: 'pgbouncer',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    NODE_EXTRA_CA_CERTS: cert.certFile,
    USAGE_GRPC_ADDRESS: `127.0.0.1:${stack.usageEnv.GRPC_PORT}`,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
  });
}, 180_000);

afterAll(async () => {
  await dispatcher?.stop();
  await stack?.stop();
  await db?.end();
  await receiver?.close();
  await bus?.close();
  await bouncer?.stop();
  await database?.drop();
});

async function command(cli: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH ?? '', DATABASE_URL: database.url, ...database.env };
  return run(process.execPath, [cli, ...args], { env }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}
const facilityCommand = (args: string[]) => command(facilityCli, args);

async function call(path: string, apiKey: string, init: { method?: string; body?: unknown } = {}) {
  const res = await fetch(`${stack.gateway}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': apiKey, ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, text, body: text ? (JSON.parse(text) as any) : undefined };
}

async function count(sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: number }>(sql, values);
  return rows[0]?.n ?? -1;
}

describe('the system through PgBouncer in transaction pooling mode', () => {
  it('applied every service migration at start-up, the CLIs find nothing to migrate; 4 concurrent migrators apply each once', async () => {
    const { rows } = await db.query<{ schema: string; n: number }>(
      `SELECT 'usage' AS schema, count(*)::int AS n FROM usage.schema_migrations
       UNION ALL SELECT 'facility', count(*)::int FROM facility.schema_migrations
       UNION ALL SELECT 'webhook', count(*)::int FROM webhook.schema_migrations`,
    );
    expect(rows).toEqual([
      { schema: 'usage', n: usageMigrations.length },
      { schema: 'facility', n: facilityMigrations.length },
      { schema: 'webhook', n: webhookMigrations.length },
    ]);

    // The migrate commands of the CLIs (the chart's migration Job): nothing left to apply.
    expect(await stack.cli(['migrate'])).toEqual({ applied: [] });
    const webhookMigrate = await command(webhookCli, ['migrate']);
    expect(webhookMigrate.code, webhookMigrate.stderr).toBe(0);
    expect(JSON.parse(webhookMigrate.stdout)).toEqual({ schema: 'webhook', applied: [] });
    const facilityMigrate = await facilityCommand(['migrate']);
    expect(facilityMigrate.code, facilityMigrate.stderr).toBe(0);

    const logger = createLogger({ service: 'pgbouncer-test', level: 'silent' });
    const probe = [
      { id: '0001_table', sql: 'CREATE TABLE probe (id int PRIMARY KEY)' },
      { id: '0002_column', sql: 'ALTER TABLE probe ADD COLUMN note text' },
      { id: '0003_row', sql: "INSERT INTO probe VALUES (1, 'once')" },
    ];
    const pools = Array.from({ length: 4 }, () =>
      createPool({
        connectionString: database.url,
        applicationName: 'migrate-probe',
        logger,
        max: 1,
        connection: { poolMode: 'transaction' },
      }),
    );
    try {
      const applied = await Promise.all(pools.map((p) => migrate(p, 'pgb_probe', probe)));
      expect(applied.flat().sort()).toEqual(['0001_table', '0002_column', '0003_row']);
      expect(await count('SELECT count(*)::int AS n FROM pgb_probe.probe')).toBe(1);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }

    // The settings a direct connection gets at start-up come with every transaction instead.
    const facilityLike = createPool({
      connectionString: database.url,
      applicationName: 'settings-probe',
      logger,
      max: 2,
      timeouts: { PG_QUERY_TIMEOUT_MS: 4321 },
      searchPath: 'facility',
      connection: { poolMode: 'transaction' },
    });
    try {
      const settings = "SELECT current_setting('search_path') AS path, current_setting('statement_timeout') AS timeout";
      expect((await facilityLike.query(settings)).rows).toEqual([{ path: 'facility', timeout: '4321ms' }]);
      expect((await withTransaction(facilityLike, (c) => c.query(settings))).rows).toEqual([{ path: 'facility', timeout: '4321ms' }]);
      expect((await facilityLike.query('SELECT count(*)::int AS n FROM schema_migrations')).rows).toEqual([
        { n: facilityMigrations.length },
      ]);
    } finally {
      await facilityLike.end();
    }
  });

  it('runs the facility CLIs: sync-echo, seed, simulate', async () => {
    // A first load into an empty database: no events; exit 2, the fixtures' rejectable rows rejected.
    const sync = await facilityCommand(['sync-echo', '--from', await writeDownload(download1()), '--json']);
    expect(sync.code, sync.stderr).toBe(2);
    const report = JSON.parse(sync.stdout) as { initial_load: boolean; events: Record<string, number> };
    expect(report.initial_load).toBe(true);
    expect(Object.values(report.events).every((n) => n === 0)).toBe(true);
    expect(await count('SELECT count(*)::int AS n FROM facility.facilities WHERE registry_id = $1', [F.plating])).toBe(1);
    expect(await count("SELECT count(*)::int AS n FROM facility.echo_sync_runs WHERE outcome = 'rows_rejected'")).toBe(1);
    const echoFacilities = await count('SELECT count(*)::int AS n FROM facility.facilities');

    // A second sync while one holds the lock (here: a transaction through PgBouncer) changes nothing.
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT pg_advisory_xact_lock(hashtext('facility:echo-sync'))");
      const busy = await facilityCommand(['sync-echo', '--from', await writeDownload(download1()), '--retry-for', '0']);
      expect(busy.code).toBe(1);
      expect(busy.stderr.trim()).toBe('facility: another ECHO sync is running (its lock is held); this one changed nothing');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }

    const seeded = await facilityCommand(['seed', '--facilities', '30', '--seed', 'pgbouncer', '--json']);
    expect(seeded.code, seeded.stderr).toBe(0);
    expect(await count('SELECT count(*)::int AS n FROM facility.facilities')).toBe(echoFacilities + 30);

    const before = await count('SELECT count(*)::int AS n FROM facility.outbox');
    const sim = await facilityCommand(['simulate', '--rate', '20', '--duration', '1', '--seed', 'pgbouncer', '--json']);
    expect(sim.code, sim.stderr).toBe(0);
    const summary = JSON.parse(sim.stdout.trim()) as { steps: number; events: Record<string, number> };
    expect(summary.steps).toBe(20);
    const written = Object.values(summary.events).reduce((a, b) => a + b, 0);
    expect(await count('SELECT count(*)::int AS n FROM facility.outbox')).toBe(before + written);
    // The relay publishes every outbox row, and the dispatcher consumes them all (no subscription yet).
    await eventually(
      () => count('SELECT count(*)::int AS n FROM facility.outbox WHERE sent_at IS NULL'),
      (n) => n === 0,
      20_000,
    );
    await eventually(
      async () => {
        const info = await bus.jsm.consumers.info(stream, 'pgbouncer');
        return info.num_pending + info.num_ack_pending;
      },
      (n) => n === 0,
      20_000,
    );
  }, 60_000);

  it('meters a Free key to exactly 100 of 130 concurrent facility reads, all stored; the usage report agrees', async () => {
    const free = await stack.createAccount('free');
    const responses = await Promise.all(Array.from({ length: 130 }, () => call('/v1/facilities?limit=5', free.apiKey)));
    expect(responses.filter((r) => r.status === 200)).toHaveLength(100);
    expect(responses.filter((r) => r.status === 429)).toHaveLength(30);
    for (const r of responses.filter((x) => x.status === 200)) expect(r.body.data).toHaveLength(5);
    expect(
      await eventually(
        () => stack.storedCount(free.accountId),
        (n) => n === 100,
      ),
    ).toBe(100);
    const pro = await stack.createAccount('pro');
    const report = await call('/v1/account/usage', pro.apiKey);
    expect(report.status, report.text).toBe(200);
    expect(report.body.data.today.request_count).toBe(1);
  }, 60_000);

  it('serves facility reads: one facility, its violations, search by place', async () => {
    const pro = await stack.createAccount('pro');
    const { rows } = await db.query<{ id: string; n: number }>(
      `SELECT f.id, (SELECT count(*)::int FROM facility.violations v WHERE v.facility_id = f.id) AS n
         FROM facility.facilities f WHERE f.latitude IS NOT NULL ORDER BY n DESC, f.registry_id LIMIT 1`,
    );
    const target = rows[0] as { id: string; n: number };
    const one = await call(`/v1/facilities/${target.id}`, pro.apiKey);
    expect(one.status, one.text).toBe(200);
    expect(one.body.data.id).toBe(target.id);
    const violations = await call(`/v1/facilities/${target.id}/violations?limit=100`, pro.apiKey);
    expect(violations.status, violations.text).toBe(200);
    expect(violations.body.data).toHaveLength(Math.min(target.n, 100));
    const { latitude, longitude } = one.body.data as { latitude: number; longitude: number };
    const near = await call(`/v1/facilities?near=${latitude},${longitude}&radius_km=1`, pro.apiKey);
    expect(near.status, near.text).toBe(200);
    expect(near.body.data[0]).toMatchObject({ id: target.id, distance_km: 0 });
  });

  it('manages webhook subscriptions, and delivers an ingested violation once, signed', async () => {
    const pro = await stack.createAccount('pro');
    const facilityId = (await db.query<{ id: string }>('SELECT id FROM facility.facilities WHERE registry_id = $1', [F.plating])).rows[0]
      ?.id as string;
    const path = `/hook/${uniqueName('pgb')}`;
    const created = await call('/v1/webhooks', pro.apiKey, {
      method: 'POST',
      body: { url: receiver.url(path), events: ['violation.new'], facility_ids: [facilityId] },
    });
    expect(created.status, created.text).toBe(201);
    const sub = created.body.data as { id: string; secret: string };
    const scratch = await call('/v1/webhooks', pro.apiKey, {
      method: 'POST',
      body: { url: receiver.url('/scratch'), events: ['case.new'] },
    });
    expect(scratch.status, scratch.text).toBe(201);
    const list = await call('/v1/webhooks', pro.apiKey);
    expect(list.body.data.map((s: { id: string }) => s.id).sort()).toEqual([sub.id, scratch.body.data.id].sort());
    const patched = await call(`/v1/webhooks/${scratch.body.data.id}`, pro.apiKey, { method: 'PATCH', body: { events: ['case.updated'] } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.events).toEqual(['case.updated']);
    expect((await call(`/v1/webhooks/${scratch.body.data.id}`, pro.apiKey)).body.data.events).toEqual(['case.updated']);
    expect((await call(`/v1/webhooks/${scratch.body.data.id}`, pro.apiKey, { method: 'DELETE' })).status).toBe(204);
    expect((await call(`/v1/webhooks/${scratch.body.data.id}`, pro.apiKey)).status).toBe(404);

    const row = violationRow(F.plating);
    const ingested = await stack.ingest({ violations: [row] });
    expect(ingested.status, ingested.text).toBe(200);
    const got = await eventually(
      async () => receiver.at(path),
      (r) => r.length >= 1,
      30_000,
    );
    expect(got).toHaveLength(1);
    const event = JSON.parse(got[0]?.body as string) as { type: string; data: { violation: Record<string, unknown> } };
    const stored = await db.query<{ id: string }>('SELECT id FROM facility.violations WHERE source_id = $1', [row.source_id]);
    expect(event.type).toBe('violation.new');
    expect(event.data.violation).toMatchObject({
      id: stored.rows[0]?.id,
      facility_id: facilityId,
      program: 'CAA',
      violation_type: 'emissions_exceedance',
      violation_date: '2026-11-20',
      severity: 'significant',
    });
    expect(await octokitVerify(sub.secret, got[0]?.body as string, got[0]?.headers['x-service-signature'] ?? '')).toBe(true);
    expect(
      await eventually(
        () => count("SELECT count(*)::int AS n FROM webhook.deliveries WHERE subscription_id = $1 AND status = 'succeeded'", [sub.id]),
        (n) => n === 1,
      ),
    ).toBe(1);

    // The webhook CLI's deactivate-account (a downgrade below Pro).
    const deactivated = await command(webhookCli, ['deactivate-account', '--account', pro.accountId, '--json']);
    expect(deactivated.code, deactivated.stderr).toBe(0);
    expect(JSON.parse(deactivated.stdout)).toEqual({ account_id: pro.accountId, reason: 'tier_downgraded', deactivated: [sub.id] });
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey)).body.data).toMatchObject({ is_active: false });
  }, 60_000);

  it('shared at most 3 server connections among every client, and leaked no session state or lock', async () => {
    const pools = (await bouncer.admin<Record<string, string | number>>('SHOW POOLS')).filter((p) => p.database === database.name);
    expect(pools).toHaveLength(1);
    const p = pools[0] as Record<string, number>;
    const servers = Number(p.sv_active) + Number(p.sv_idle) + Number(p.sv_used) + Number(p.sv_tested) + Number(p.sv_login);
    expect(servers).toBeLessThanOrEqual(bouncer.poolSize);
    const clients = (await bouncer.admin<{ database: string }>('SHOW CLIENTS')).filter((c) => c.database === database.name);
    expect(clients.length).toBeGreaterThan(bouncer.poolSize);
    // Every server connection is back in the pool with PostgreSQL's defaults: no SET leaked out of a transaction.
    const { rows } = await db.query<{ search_path: string; statement_timeout: string }>(
      "SELECT current_setting('search_path') AS search_path, current_setting('statement_timeout') AS statement_timeout",
    );
    expect(rows[0]).toEqual({ search_path: '"$user", public', statement_timeout: '0' });
    // No named prepared statement (the dispatcher's hot statements stay unnamed in transaction mode).
    expect(await count('SELECT count(*)::int AS n FROM pg_prepared_statements')).toBe(0);
    // No advisory lock outlived its transaction (a session lock would stay on a pooled server connection).
    expect(
      await count(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      ),
    ).toBe(0);
  });
});
