import { createLogger, createPool, type Pool } from '@fcd/service-kit';
import {
  freePort,
  gatewayEnv,
  type ServiceProcess,
  type Stack,
  startService,
  startStack,
  TcpBalancer,
  TEST_INGEST_TOKEN,
  TEST_INTERNAL_AUTH_SECRET,
  TEST_USAGE_GRPC_SECRET,
  testUrls,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { SubscriptionStore } from '@fcd/webhooks';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Receiver, SECRET_KEY, secretBox, sleep, subscribe, type TestDb, testCertificate } from '../../dispatcher/test/helpers';

/**
 * Rolling updates under load (docs/operations.md, "Rollouts"). Two replicas of each kind (gateway, usage,
 * facility, webhook, dispatcher) on one database, Redis key prefix and JetStream stream, while a
 * bounded load runs: API reads through the gateways with a Pro key (account usage, facility
 * reads, webhook-subscription reads) and ingestion of new violations, whose events the
 * dispatchers deliver to an HTTPS receiver.
 *
 * What stands in for Kubernetes:
 * - in front of the gateways (the ingress): the load picks a gateway per request among those in
 *   rotation, so a gateway taken out gets no new request, only its in-flight ones finish;
 * - in front of usage (gRPC), facility and webhook (HTTP): a TCP balancer per Service
 *   (TcpBalancer, like kube-proxy): a replica taken out gets no new connection, and the
 *   connections open to it (the gateway's keep-alive pool, its gRPC channel) stay with it until
 *   it closes them.
 * Each kind in turn is rolled one replica at a time: out of rotation → a short preStop pause →
 * SIGTERM → exit 0 → started again on the same port → ready → back in rotation.
 *
 * Asserted exactly: no answer other than 2xx (a Pro key never gets 429; a client retry would
 * hide a failure, so there is none), the account's stored count equals the 2xx answers, every
 * event in the outbox reaches the receiver, and every delivery carries one of those event ids.
 */
const PRESTOP_MS = 300;
const LANES = 4;
/** Pause of one lane between two requests: 4 lanes give ~60 API requests/s; ingestion adds ~15/s. */
const LANE_PAUSE_MS = 45;
const INGEST_EVERY_MS = 50;

type Kind = 'gateway' | 'usage' | 'facility' | 'webhook' | 'dispatcher';

interface Replica {
  kind: Kind;
  /** Port the replica serves on (kept across restarts; its balancer endpoint). */
  port: number;
  env: Record<string, string>;
  proc: ServiceProcess;
}

let stack: Stack;
let pool: Pool;
let receiver: Receiver;
let apiKey: string;
let accountId: string;
const stream = uniqueName('ROLLOUT').toUpperCase();
const hook = '/hook/rollout';
const replicas: Record<Kind, Replica[]> = { gateway: [], usage: [], facility: [], webhook: [], dispatcher: [] };
const balancers: Partial<Record<Kind, TcpBalancer>> = {};
/** Gateway ports the "ingress" sends new requests to. */
const gatewaysIn = new Set<number>();
const agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });

beforeAll(async () => {
  const cert = testCertificate();
  receiver = new Receiver(cert);
  await receiver.start();

  const ports = async (n: number) => Promise.all(Array.from({ length: n }, () => freePort()));
  const [usagePorts, facilityPorts, webhookPorts, gatewayPorts] = [await ports(2), await ports(2), await ports(2), await ports(2)];
  const usageLb = await TcpBalancer.start(usagePorts);
  const facilityLb = await TcpBalancer.start(facilityPorts);
  const webhookLb = await TcpBalancer.start(webhookPorts);
  Object.assign(balancers, { usage: usageLb, facility: facilityLb, webhook: webhookLb });

  // Usage replica 0 comes from startStack (database, Redis key prefix, CLI, stored counts); the gateways are started here.
  stack = await startStack({ label: 'rollout', gateways: 0, usageEnv: { GRPC_PORT: String(usagePorts[0]) } });
  pool = createPool({ connectionString: stack.db.url, applicationName: 'test', logger: createLogger({ service: 't', level: 'silent' }) });

  const common = { DATABASE_URL: stack.db.url, METRICS_PORT: '0', HOST: '127.0.0.1', INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET };
  const usageEnv = (i: number) => ({ ...stack.usageEnv, GRPC_PORT: String(usagePorts[i]) });
  const facilityEnv = (i: number) => ({
    ...common,
    PORT: String(facilityPorts[i]),
    NATS_URL: testUrls.nats,
    INGEST_TOKEN: TEST_INGEST_TOKEN,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    OUTBOX_POLL_MS: '50',
  });
  const webhookEnv = (i: number) => ({
    ...common,
    PORT: String(webhookPorts[i]),
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    FACILITY_URL: facilityLb.url,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  });
  const dispatcherEnv = {
    DATABASE_URL: stack.db.url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    DISPATCHER_CONSUMER: `c_${stream}`,
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms',
    DISPATCHER_POLL_MS: '50',
    USAGE_GRPC_ADDRESS: `127.0.0.1:${usageLb.port}`,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
    NODE_EXTRA_CA_CERTS: cert.certFile,
  };
  const gatewayBase = await gatewayEnv(usageLb.port, {
    facilityUrl: facilityLb.url,
    webhookUrl: webhookLb.url,
    redisPrefix: stack.redisPrefix,
  });
  const gatewayEnvOf = (i: number) => ({ ...gatewayBase, PORT: String(gatewayPorts[i]) });

  const add = (kind: Kind, port: number, env: Record<string, string>, proc: ServiceProcess) =>
    replicas[kind].push({ kind, port, env, proc });
  add('usage', usagePorts[0] as number, usageEnv(0), stack.usage);
  // The facility service migrates first (the webhook service reads facilities through it).
  add('facility', facilityPorts[0] as number, facilityEnv(0), await startService('facility', facilityEnv(0)));
  const started = await Promise.all([
    startService('usage', usageEnv(1)),
    startService('facility', facilityEnv(1)),
    startService('webhook', webhookEnv(0)),
    startService('gateway', gatewayEnvOf(0)),
  ]);
  add('usage', usagePorts[1] as number, usageEnv(1), started[0]);
  add('facility', facilityPorts[1] as number, facilityEnv(1), started[1]);
  add('webhook', webhookPorts[0] as number, webhookEnv(0), started[2]);
  add('gateway', gatewayPorts[0] as number, gatewayEnvOf(0), started[3]);
  const more = await Promise.all([
    startService('webhook', webhookEnv(1)),
    startService('gateway', gatewayEnvOf(1)),
    startService('dispatcher', dispatcherEnv),
  ]);
  add('webhook', webhookPorts[1] as number, webhookEnv(1), more[0]);
  add('gateway', gatewayPorts[1] as number, gatewayEnvOf(1), more[1]);
  add('dispatcher', 0, dispatcherEnv, more[2]);
  add('dispatcher', 0, dispatcherEnv, await startService('dispatcher', dispatcherEnv));
  for (const g of replicas.gateway) gatewaysIn.add(g.port);

  const account = await stack.createAccount('pro');
  apiKey = account.apiKey;
  const db = { pool, subscriptions: new SubscriptionStore(pool, secretBox) } as unknown as TestDb;
  await subscribe(db, {
    url: receiver.url(hook),
    account_id: account.accountId,
    events: ['violation.new', 'facility.status_changed', 'case.new', 'case.updated'],
  });
  accountId = account.accountId;
}, 120_000);

afterAll(async () => {
  const all = Object.values(replicas).flat();
  await Promise.allSettled(all.map((r) => r.proc.stop('SIGKILL')));
  await stack?.stop().catch(() => undefined);
  await Promise.allSettled(Object.values(balancers).map((b) => b.close()));
  await pool?.end().catch(() => undefined);
  await receiver?.close();
  await agent.close();
});

interface Tally {
  sent: number;
  ok: number;
  statuses: Record<string, number>;
  failures: string[];
}

const newTally = (): Tally => ({ sent: 0, ok: 0, statuses: {}, failures: [] });

function record(t: Tally, what: string, status: number | string, okStatuses: number[]): void {
  t.sent++;
  t.statuses[status] = (t.statuses[status] ?? 0) + 1;
  if (typeof status === 'number' && okStatuses.includes(status)) t.ok++;
  else t.failures.push(`${what}: ${status}`);
}

/** The bounded load: API reads through the gateways in rotation, and ingestion through the facility balancer. */
function startLoad() {
  let on = true;
  const api = newTally();
  const ingest = newTally();
  let turn = 0;
  const paths = ['/v1/account/usage', '/v1/facilities?limit=1', '/v1/account/usage', '/v1/violations?limit=5', '/v1/webhooks'];
  const lane = async (offset: number) => {
    for (let n = offset; on; n++) {
      const path = paths[n % paths.length] as string;
      const inRotation = [...gatewaysIn];
      const port = inRotation[turn++ % inRotation.length];
      try {
        const res = await agent.request({
          origin: `http://127.0.0.1:${port}`,
          path,
          method: 'GET',
          headers: { 'x-api-key': apiKey },
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        });
        const text = await res.body.text();
        record(api, `GET ${path} via :${port}${res.statusCode === 200 ? '' : ` ${text.slice(0, 200)}`}`, res.statusCode, [200]);
      } catch (err) {
        record(api, `GET ${path} via :${port}`, (err as Error).message, []);
      }
      await sleep(LANE_PAUSE_MS);
    }
  };
  let registry = 0;
  const ingestLane = async () => {
    while (on) {
      const registryId = `8${Date.now()}${registry++}`.slice(0, 14);
      const body = {
        facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'no_violation' }],
        violations: [violationRow(registryId)],
      };
      try {
        const res = await agent.request({
          origin: balancers.facility?.url as string,
          path: '/internal/v1/ingest',
          method: 'POST',
          headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        });
        const text = await res.body.text();
        record(ingest, `ingest ${res.statusCode < 300 ? '' : text.slice(0, 200)}`, res.statusCode, [200, 201, 202]);
      } catch (err) {
        record(ingest, 'ingest', (err as Error).message, []);
      }
      await sleep(INGEST_EVERY_MS);
    }
  };
  const done = Promise.all([...Array.from({ length: LANES }, (_, i) => lane(i)), ingestLane()]);
  return {
    api,
    ingest,
    async stop() {
      on = false;
      await done;
    },
  };
}

/** Waits until the load got `n` more 2xx answers. */
async function progress(t: Tally, n: number): Promise<void> {
  const target = t.ok + n;
  const end = Date.now() + 20_000;
  while (t.ok < target) {
    if (Date.now() > end) throw new Error(`load stalled at ${t.ok} answers (wanted ${target}): ${JSON.stringify(t.statuses)}`);
    await sleep(50);
  }
}

/** One replica's turn: out of rotation, a preStop pause, SIGTERM, exit 0, started again, back in rotation. */
async function roll(r: Replica, load: { api: Tally }): Promise<{ kind: Kind; exit: number | null; downMs: number }> {
  const t0 = Date.now();
  if (r.kind === 'gateway') gatewaysIn.delete(r.port);
  else balancers[r.kind]?.remove(r.port);
  await sleep(PRESTOP_MS);
  const exit = await r.proc.stop('SIGTERM');
  r.proc = await startService(r.kind, r.env);
  if (r.kind === 'gateway') gatewaysIn.add(r.port);
  else balancers[r.kind]?.add(r.port);
  const downMs = Date.now() - t0;
  await progress(load.api, 40);
  return { kind: r.kind, exit, downMs };
}

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(200);
  }
}

describe('rolling update of every service under load', () => {
  it('rolls 2 gateways, 2 usage, 2 facility, 2 webhook and 2 dispatchers one at a time: 0 failed requests, counts exact, 0 deliveries lost', async () => {
    const t0 = Date.now();
    const load = startLoad();
    await progress(load.api, 100);
    const turns = [];
    for (const kind of ['gateway', 'usage', 'facility', 'webhook', 'dispatcher'] as const) {
      for (const r of replicas[kind]) turns.push(await roll(r, load));
    }
    await load.stop();
    const rolledMs = Date.now() - t0;

    // Every replica left with exit 0 (drained within its bound, not killed).
    expect(turns.map((t) => `${t.kind}:${t.exit}`)).toEqual(turns.map((t) => `${t.kind}:0`));
    // No request failed: every answer a 2xx (no 429 with a Pro key, no 503, no reset).
    expect(load.api.failures).toEqual([]);
    expect(load.ingest.failures).toEqual([]);

    // The stored count equals the 2xx answers (usage flushes every 200 ms; the stopped replicas flushed at SIGTERM).
    await until(async () => (await stack.storedCount(accountId)) >= load.api.ok, 15_000, 'counts stored');
    await sleep(500);
    expect(await stack.storedCount(accountId)).toBe(load.api.ok);

    // Every event of the outbox published and delivered at least once; every delivery is one of them.
    const outbox = async () =>
      (
        await pool.query<{ id: string; sent: boolean }>(
          "SELECT payload::json->>'id' AS id, sent_at IS NOT NULL AS sent FROM facility.outbox",
        )
      ).rows;
    const delivered = () => receiver.at(hook).map((r) => (JSON.parse(r.body) as { id: string }).id);
    await until(
      async () => {
        const rows = await outbox();
        const got = new Set(delivered());
        return rows.length > 0 && rows.every((r) => r.sent && got.has(r.id));
      },
      30_000,
      'every outbox event delivered',
    );
    const events = new Set((await outbox()).map((r) => r.id));
    const deliveries = delivered();
    expect(deliveries.filter((id) => !events.has(id))).toEqual([]);
    expect(new Set(deliveries).size).toBe(events.size);

    console.log(
      JSON.stringify({
        rolledMs,
        api: { requests: load.api.sent, ok: load.api.ok, statuses: load.api.statuses },
        ingest: { requests: load.ingest.sent, ok: load.ingest.ok },
        events: events.size,
        deliveries: deliveries.length,
        redelivered: deliveries.length - new Set(deliveries).size,
        turns,
      }),
    );
  }, 150_000);
});
