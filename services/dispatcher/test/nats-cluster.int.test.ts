import { randomUUID } from 'node:crypto';
import {
  PrivateNatsCluster,
  type ServiceProcess,
  startService,
  TEST_INGEST_TOKEN,
  TEST_INTERNAL_AUTH_SECRET,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Receiver, SECRET_KEY, setupDb, sleep, subscribe, type TestDb, teardownDb, testCertificate } from './helpers';

/**
 * The facility relay and the dispatcher on a 3-node JetStream cluster (private nats-server
 * processes, the EVENTS stream at R3, NATS_URL listing every node). One node, the stream leader
 * and the one the relay is connected to, is SIGKILLed while ingestion writes and the dispatcher
 * delivers about 200 events/s: the clients reconnect to the other nodes, a new leader takes over,
 * every event reaches the receiver (duplicates only under an event id already received), and the
 * killed node, restarted on its store, catches up to the same stream as the others.
 */
const stream = uniqueName('NATS_R3').toUpperCase();
const prefix = stream.toLowerCase();
const consumer = 'r3_dispatcher';
const RELAY_CLIENT = 'facility-relay';
const DISPATCHER_CLIENT = `dispatcher-${consumer}`;
/** 20 violations every 100 ms: about 200 violation.new events per second. */
const BATCH = 20;
const TICK_MS = 100;
const FACILITIES = 20;

let cluster: PrivateNatsCluster;
let db: TestDb;
let receiver: Receiver;
let facility: ServiceProcess;
let dispatcher: ServiceProcess;
let facilityUrl: string;
const hook = `/hook/${randomUUID()}`;
const registryIds = Array.from({ length: FACILITIES }, (_, i) => `7${String(Date.now()).slice(-9)}${String(i).padStart(2, '0')}`);

beforeAll(async () => {
  const cert = testCertificate();
  cluster = await PrivateNatsCluster.start({ size: 3 });
  db = await setupDb('nats_cluster');
  receiver = new Receiver(cert);
  await receiver.start();
  const nats = { NATS_URL: cluster.url, NATS_STREAM_REPLICAS: '3', EVENTS_STREAM: stream, EVENTS_SUBJECT_PREFIX: prefix };
  const common = { DATABASE_URL: db.database.url, PORT: '0', METRICS_PORT: '0', HOST: '127.0.0.1' };
  facility = await startService('facility', {
    ...common,
    ...nats,
    INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET,
    INGEST_TOKEN: TEST_INGEST_TOKEN,
    OUTBOX_POLL_MS: '50',
  });
  facilityUrl = `http://127.0.0.1:${(await facility.waitForLog((l) => l.msg === 'ready')).port as number}`;
  dispatcher = await startService('dispatcher', {
    ...common,
    ...nats,
    DISPATCHER_CONSUMER: consumer,
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms',
    DISPATCHER_POLL_MS: '50',
    NODE_EXTRA_CA_CERTS: cert.certFile,
  });
  await subscribe(db, { url: receiver.url(hook), events: ['violation.new'] });
  expect(
    await ingest({
      facilities: registryIds.map((registry_id) => ({
        registry_id,
        name: 'Acme Smelting',
        state: 'OH',
        compliance_status: 'no_violation',
      })),
    }),
  ).toBe(200);
}, 120_000);

afterAll(async () => {
  await dispatcher?.stop('SIGKILL');
  await facility?.stop('SIGKILL');
  await receiver?.close();
  await teardownDb(db);
  await cluster?.stop();
});

async function ingest(body: object): Promise<number> {
  const res = await fetch(`${facilityUrl}/internal/v1/ingest`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  await res.text();
  return res.status;
}

/** Ingests BATCH new violations every TICK_MS until stopped; the status of every call. */
function load(): { stop(): Promise<number[]> } {
  let running = true;
  const statuses: number[] = [];
  let n = 0;
  const done = (async () => {
    while (running) {
      const started = Date.now();
      const violations = Array.from({ length: BATCH }, () => violationRow(registryIds[n++ % FACILITIES] as string));
      statuses.push(await ingest({ violations }).catch(() => 0));
      await sleep(Math.max(0, TICK_MS - (Date.now() - started)));
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return statuses;
    },
  };
}

/** The node a client (by its connect() name) is connected to now, if any. */
async function nodeOf(client: string): Promise<string | undefined> {
  for (const name of cluster.names) {
    const clients = await cluster.clientsOf(name).catch(() => [] as string[]);
    if (clients.includes(client)) return name;
  }
  return undefined;
}

/** The stream leader as the live nodes see it ('' during an election). */
async function leaderOf(nodes: string[]): Promise<string> {
  for (const name of nodes) {
    const s = await cluster.streamOn(name, stream).catch(() => null);
    if (s?.leader) return s.leader;
  }
  return '';
}

/** The leader of the dispatcher's consumer ('' during an election). */
async function consumerLeader(jsm: JetStreamManager): Promise<string> {
  return (await jsm.consumers.info(stream, consumer).catch(() => undefined))?.cluster?.leader ?? '';
}

/**
 * Moves the leader of the stream, then of the consumer, to `target` (NATS 2.9: a step-down
 * elects one of the others at random, so step down until it lands there).
 */
async function makeLeader(admin: NatsConnection, jsm: JetStreamManager, target: string): Promise<void> {
  const moves = [
    { leader: () => leaderOf(cluster.names), subject: `$JS.API.STREAM.LEADER.STEPDOWN.${stream}` },
    { leader: () => consumerLeader(jsm), subject: `$JS.API.CONSUMER.LEADER.STEPDOWN.${stream}.${consumer}` },
  ];
  for (const move of moves) {
    await cluster.waitFor(
      async () => {
        const leader = await move.leader();
        if (leader === target) return true;
        if (leader) await admin.request(move.subject, '', { timeout: 2000 }).catch(() => undefined);
        await sleep(400);
        return false;
      },
      `${move.subject} to land on ${target}`,
      20_000,
    );
  }
}

it('no event is lost with one JetStream node killed mid-stream; the node restarts and catches up', async () => {
  const t0 = Date.now();
  const admin = await connect({ servers: cluster.urls, maxReconnectAttempts: -1, reconnectTimeWait: 200, name: 'test-admin' });
  const jsm = await jetstreamManager(admin, { timeout: 2000 });
  try {
    // The stream was created by the services, at R3 on every node.
    await cluster.waitFor(async () => (await leaderOf(cluster.names)) !== '', 'the stream to have a leader');
    for (const name of cluster.names) expect(await cluster.streamOn(name, stream), name).not.toBeNull();
    expect((await jsm.streams.info(stream)).config.num_replicas).toBe(3);
    await cluster.waitFor(async () => (await consumerLeader(jsm)) !== '', 'the consumer to have a leader');
    expect((await jsm.consumers.info(stream, consumer)).cluster?.replicas).toHaveLength(2);

    // The victim: the node the relay publishes through, made the stream's and the consumer's leader too.
    const victim = (await nodeOf(RELAY_CLIENT)) as string;
    expect(cluster.names).toContain(victim);
    const dispatcherNode = await nodeOf(DISPATCHER_CLIENT);
    await makeLeader(admin, jsm, victim);
    const traffic = load();
    await sleep(3000);
    await cluster.kill(victim);
    const killedAt = Date.now();
    const survivors = cluster.names.filter((n) => n !== victim);

    // The clients reconnect through the server list, a new leader is elected among the others.
    await cluster.waitFor(
      async () => survivors.includes((await nodeOf(RELAY_CLIENT)) ?? '') && survivors.includes((await nodeOf(DISPATCHER_CLIENT)) ?? ''),
      'the relay and the dispatcher to reconnect to a live node',
      15_000,
    );
    await cluster.waitFor(async () => survivors.includes(await leaderOf(survivors)), 'a new stream leader', 15_000);
    await cluster.waitFor(async () => survivors.includes(await consumerLeader(jsm)), 'a new consumer leader', 15_000);
    await facility.waitForLog((l) => l.msg === 'nats reconnected', 15_000);
    await sleep(Math.max(0, 4000 - (Date.now() - killedAt)));

    // The node restarts on its store while events still flow, and catches up.
    await cluster.restart(victim);
    await sleep(2000);
    const statuses = await traffic.stop();
    expect(statuses.length).toBeGreaterThan(50);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);

    // Every outbox row published (sent), exactly once in the stream (deduplicated by Nats-Msg-Id).
    await cluster.waitFor(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM facility.outbox WHERE sent_at IS NULL');
        return rows[0]?.n === 0;
      },
      'the outbox to be sent',
      20_000,
    );
    const { rows: outbox } = await db.pool.query<{ id: string; type: string }>(
      "SELECT payload::json->>'id' AS id, type FROM facility.outbox ORDER BY seq",
    );
    const published = new Set(outbox.filter((r) => r.type === 'violation.new').map((r) => r.id));
    expect(published.size).toBe(statuses.length * BATCH);

    // The count received equals the count published; a duplicate only under an id already received.
    const allSentAt = Date.now();
    const receivedIds = () => receiver.at(hook).map((r) => (JSON.parse(r.body) as { id: string }).id);
    await cluster
      .waitFor(async () => new Set(receivedIds()).size >= published.size, 'every event at the receiver', 45_000)
      .catch(() => undefined);
    const requests = receiver.at(hook);
    const ids = receivedIds();
    const distinct = new Set(ids);
    expect([...published].filter((id) => !distinct.has(id))).toEqual([]);
    expect([...distinct].filter((id) => !published.has(id))).toEqual([]);
    expect(distinct.size).toBe(published.size);
    for (const r of requests) expect(r.headers['webhook-id']).toBe((JSON.parse(r.body) as { id: string }).id);
    const duplicates = ids.length - distinct.size;

    // The restarted node holds the same stream as the others: every event once, same last sequence.
    await cluster.waitFor(
      async () => {
        const states = await Promise.all(cluster.names.map((n) => cluster.streamOn(n, stream)));
        return states.every((s) => s !== null && s.messages === outbox.length && s.lastSeq === states[0]?.lastSeq);
      },
      'the restarted node to catch up',
      20_000,
    );
    const leader = await leaderOf(cluster.names);
    const leaderView = await cluster.streamOn(leader, stream);
    expect(leaderView?.replicas.map((r) => [r.name, r.current]).sort()).toEqual(
      cluster.names.filter((n) => n !== leader).map((n) => [n, true]),
    );
    const relayFailures = facility.logs().filter((l) => l.msg === 'outbox publish failed; will retry').length;
    console.log(
      JSON.stringify({
        victim,
        dispatcherNode,
        relayFailures,
        published: published.size,
        outbox: outbox.length,
        requests: requests.length,
        duplicates,
        killedAfterS: (killedAt - t0) / 1000,
        allSentAfterS: (allSentAt - t0) / 1000,
        seconds: (Date.now() - t0) / 1000,
      }),
    );
  } finally {
    await admin.close();
  }
}, 90_000);
