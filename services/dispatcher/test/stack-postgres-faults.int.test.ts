import { randomUUID } from 'node:crypto';
import { createLogger, createPool, migrate, type Pool } from '@fcd/service-kit';
import {
  type ApiStack,
  FaultProxy,
  PrivatePostgres,
  type ServiceProcess,
  startApiStack,
  startService,
  testUrls,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { SubscriptionStore, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBus, Receiver, SECRET_KEY, secretBox, sleep, subscribe, type TestDb, testCertificate } from './helpers';

/**
 * The five services as processes on one private Postgres cluster, reached
 * through a fault proxy, under light load (ingestion, API reads through the
 * gateway, webhook deliveries), through each fault: a fast stop and start, a
 * terminate-all (a failover as a client sees it) and black-holed traffic.
 * No process exits; /readyz says postgres is down during the fault and
 * recovers by itself; every answer is a 2xx or a 503 envelope with
 * Retry-After, none hangs; every ingested event reaches the receiver.
 */
const DB = 'stack_faults';
/** Short pool timeouts, so a black hole ends in 503 within a few seconds. */
const PG_TIMEOUTS = { PG_CONNECT_TIMEOUT_MS: '1000', PG_QUERY_TIMEOUT_MS: '2000' };
/** Longest wait for one answer: the gateway's and services' timeouts are all below it. */
const REQUEST_TIMEOUT_MS = 8000;
let pgs: PrivatePostgres;
let proxy: FaultProxy;
let pool: Pool;
let stack: ApiStack;
let dispatcher: ServiceProcess;
let dispatcherUrl: string;
let receiver: Receiver;
let apiKey: string;
const stream = uniqueName('PG_FAULTS').toUpperCase();
const hook = `/hook/${randomUUID()}`;

beforeAll(async () => {
  const cert = testCertificate();
  pgs = await PrivatePostgres.start();
  await pgs.createDatabase(DB);
  proxy = await FaultProxy.start({ port: pgs.port });
  const url = `postgres://postgres@127.0.0.1:${proxy.port}/${DB}`;
  // The test's own pool goes straight to the cluster: it reads the outcome, through no fault.
  pool = createPool({ connectionString: pgs.url(DB), applicationName: 'test', logger: createLogger({ service: 't', level: 'silent' }) });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  receiver = new Receiver(cert);
  await receiver.start();
  stack = await startApiStack({
    label: 'pg_faults',
    database: { url, name: DB, drop: async () => undefined },
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    facilityEnv: PG_TIMEOUTS,
    webhookEnv: { ...PG_TIMEOUTS, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
    usageEnv: PG_TIMEOUTS,
  });
  dispatcher = await startService('dispatcher', {
    ...PG_TIMEOUTS,
    DATABASE_URL: url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    DISPATCHER_CONSUMER: `c_${stream}`,
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms',
    DISPATCHER_POLL_MS: '50',
    NODE_EXTRA_CA_CERTS: cert.certFile,
  });
  dispatcherUrl = `http://127.0.0.1:${(await dispatcher.waitForLog((l) => l.msg === 'ready')).port as number}`;
  const account = await stack.createAccount('pro');
  apiKey = account.apiKey;
  const db = { pool, subscriptions: new SubscriptionStore(pool, secretBox) } as unknown as TestDb;
  await subscribe(db, {
    url: receiver.url(hook),
    account_id: account.accountId,
    events: ['violation.new', 'facility.status_changed', 'case.new', 'case.updated'],
  });
}, 180_000);

afterAll(async () => {
  await dispatcher?.stop('SIGKILL');
  await stack?.stop();
  await receiver?.close();
  const bus = await openBus(stream).catch(() => undefined);
  await bus?.close();
  await pool?.end().catch(() => undefined);
  await proxy?.close();
  await pgs?.destroy();
});

type Outcome = { what: string; status: number | 'hang' | 'refused'; retryAfter?: string | null; code?: string };

async function request(what: string, url: string, init: RequestInit = {}): Promise<Outcome> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    const text = await res.text();
    const code = res.status >= 400 ? (JSON.parse(text) as { error?: { code?: string } }).error?.code : undefined;
    return { what, status: res.status, retryAfter: res.headers.get('retry-after'), ...(code ? { code } : {}) };
  } catch (err) {
    return { what, status: (err as Error).name === 'TimeoutError' ? 'hang' : 'refused' };
  }
}

let registry = 0;
/** One round of the light load: an ingestion (a new facility and a violation) and two reads through the gateway. */
async function round(): Promise<Outcome[]> {
  const registryId = `9${Date.now()}${registry++}`.slice(0, 12);
  const body = {
    facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'no_violation' }],
    violations: [violationRow(registryId)],
  };
  return Promise.all([
    request('ingest', `${stack.facilityUrl}/internal/v1/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer test-ingest-token-0123456789abcdef0123456789`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
    request('facilities', `${stack.gateway}/v1/facilities?limit=1`, { headers: { 'x-api-key': apiKey } }),
    request('webhooks', `${stack.gateway}/v1/webhooks`, { headers: { 'x-api-key': apiKey } }),
  ]);
}

function load(): { stop(): Promise<Outcome[]> } {
  let on = true;
  const all: Outcome[] = [];
  const done = (async () => {
    while (on) {
      all.push(...(await round()));
      await sleep(150);
    }
  })();
  return {
    async stop() {
      on = false;
      await done;
      return all;
    },
  };
}

const readyUrls = () => ({ facility: stack.facilityUrl, webhook: stack.webhookUrl, dispatcher: dispatcherUrl });

async function postgresState(base: string): Promise<string | undefined> {
  const r = await request('readyz', `${base}/readyz`);
  if (r.status === 200) return 'up';
  const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).catch(() => undefined);
  const body = (await res?.json().catch(() => undefined)) as
    | { error?: { details?: { checks?: { postgres?: { status: string } } } } }
    | undefined;
  return body?.error?.details?.checks?.postgres?.status;
}

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(200);
  }
}

function processes(): ServiceProcess[] {
  return [stack.facility, stack.webhook, stack.usage, ...stack.gateways, dispatcher];
}

function expectAlive(): void {
  // On a failure, the process's last log lines (its fatal line says what escaped).
  for (const p of processes())
    expect({ name: p.name, exit: p.proc.exitCode, signal: p.proc.signalCode }, p.output.slice(-5).join('\n')).toEqual({
      name: p.name,
      exit: null,
      signal: null,
    });
}

/** Every answer is a 2xx, or a 503 SERVICE_UNAVAILABLE envelope with Retry-After; none hangs, none is a 500. */
function expectOnly2xxOr503(outcomes: Outcome[]): void {
  const bad = outcomes.filter(
    (o) => !(typeof o.status === 'number' && o.status < 300) && !(o.status === 503 && o.code === 'SERVICE_UNAVAILABLE' && o.retryAfter),
  );
  expect(bad).toEqual([]);
}

async function fault(run: () => Promise<void>): Promise<Outcome[]> {
  const l = load();
  await sleep(600);
  await run();
  const outcomes = await l.stop();
  expectAlive();
  for (const [name, base] of Object.entries(readyUrls()))
    await until(async () => (await postgresState(base)) === 'up', 20_000, `${name} ready again`);
  // The pools recovered without a restart: a full round answers 200.
  await until(async () => (await round()).every((o) => o.status === 200), 20_000, 'a round of 200s');
  await everyEventDelivered();
  expectAlive();
  expectOnly2xxOr503(outcomes);
  return outcomes;
}

/** Every outbox row is published, and every event reached the receiver (at least once, same id). */
async function everyEventDelivered(): Promise<void> {
  await until(
    async () => {
      const { rows } = await pool.query<{ id: string; sent: boolean }>(
        "SELECT payload::json->>'id' AS id, sent_at IS NOT NULL AS sent FROM facility.outbox",
      );
      const got = new Set(receiver.at(hook).map((r) => (JSON.parse(r.body) as { id: string }).id));
      return rows.length > 0 && rows.every((r) => r.sent && got.has(r.id));
    },
    30_000,
    'every outbox row published and delivered',
  );
}

async function expectPostgresDown(): Promise<void> {
  for (const [name, base] of Object.entries(readyUrls()))
    await until(async () => (await postgresState(base)) === 'down', 10_000, `${name} reports postgres down`);
}

describe('the five services through Postgres faults, under load', () => {
  it('a fast stop and start: 503s with Retry-After during, /readyz down then up, no event lost', async () => {
    const outcomes = await fault(async () => {
      await pgs.stopFast();
      await expectPostgresDown();
      await sleep(3000);
      expectAlive();
      await pgs.start();
    });
    expect(outcomes.some((o) => o.status === 503)).toBe(true);
  }, 90_000);

  it('terminate-all (a failover as clients see it), repeatedly: no process exits, no event lost', async () => {
    await fault(async () => {
      for (let i = 0; i < 10; i++) {
        await pgs.terminateBackends(DB);
        await sleep(200);
      }
    });
  }, 90_000);

  it('30 s of black-holed traffic: answers end in 503 within the timeouts, /readyz down, recovery after', async () => {
    const outcomes = await fault(async () => {
      proxy.blackhole();
      const t0 = Date.now();
      await expectPostgresDown();
      await sleep(30_000 - (Date.now() - t0));
      expectAlive();
      proxy.heal();
    });
    expect(outcomes.some((o) => o.status === 503)).toBe(true);
  }, 90_000);
});
