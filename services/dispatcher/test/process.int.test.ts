import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { createClient, grpc } from '@fcd/grpc';
import { GetAccountsRequestSchema, UsageService } from '@fcd/proto';
import {
  eventually,
  freePort,
  hostsPreloadEnv,
  type LogLine,
  repoRoot,
  type ServiceProcess,
  startService,
  TEST_USAGE_GRPC_SECRET,
  testUrls,
  uniqueName,
} from '@fcd/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  attemptsOf,
  type Bus,
  deliveriesOf,
  openBus,
  PrivateNats,
  Receiver,
  SECRET_KEY,
  setupDb,
  sleep,
  subscribe,
  type TestDb,
  teardownDb,
  testCertificate,
  violationEvent,
} from './helpers';

/**
 * The built dispatcher as a process (the vitest global setup builds it),
 * against a private nats-server that the tests restart,
 * delivering over HTTPS to a receiver whose self-signed certificate the
 * process trusts through NODE_EXTRA_CA_CERTS.
 */
let db: TestDb;
let nats: PrivateNats;
let receiver: Receiver;
let cert: ReturnType<typeof testCertificate>;
/** A name the hosts preload (hostsPreloadEnv) resolves to 127.0.0.1 inside a dispatcher process; in the receiver's certificate. */
const REBIND_HOST = 'rebind.example.test';
const running: ServiceProcess[] = [];
const buses: Bus[] = [];

beforeAll(async () => {
  cert = testCertificate([REBIND_HOST]);
  db = await setupDb('dispatcher_proc');
  nats = new PrivateNats(await freePort());
  await nats.start();
  receiver = new Receiver(cert);
  await receiver.start();
}, 120_000);

// Every test starts with no dispatcher running: they share one database, and a dispatcher left over
// from an earlier test (with other settings) would claim this test's due deliveries.
afterEach(async () => {
  for (const p of running.splice(0)) await p.stop('SIGKILL');
});

afterAll(async () => {
  for (const p of running) await p.stop('SIGKILL');
  for (const b of buses) await b.nc.close().catch(() => undefined);
  await receiver?.close();
  await nats?.stop();
  if (nats) rmSync(nats.dir, { recursive: true, force: true });
  await teardownDb(db);
});

function env(stream: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: db.database.url,
    NATS_URL: nats.url,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    DISPATCHER_CONSUMER: `c_${stream}`,
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '300ms,300ms,300ms,300ms,300ms',
    DISPATCHER_POLL_MS: '100',
    NODE_EXTRA_CA_CERTS: cert.certFile,
    ...extra,
  };
}

async function start(e: Record<string, string>): Promise<{ svc: ServiceProcess; base: string; metrics: string }> {
  const svc = await startService('dispatcher', e);
  running.push(svc);
  const ready = svc.logs().find((l) => l.msg === 'ready') as LogLine & { port: number; metricsPort: number };
  const base = `http://127.0.0.1:${ready.port}`;
  await eventually(
    () => fetch(`${base}/readyz`).then((r) => r.status),
    (s) => s === 200,
  );
  return { svc, base, metrics: `http://127.0.0.1:${ready.metricsPort}` };
}

async function bus(stream: string): Promise<Bus> {
  const b = await openBus(stream, nats.url);
  buses.push(b);
  // The dispatcher creates the stream when missing; wait for it.
  await eventually(
    () =>
      b.jsm.streams.info(stream).then(
        () => true,
        () => false,
      ),
    (ok) => ok,
  );
  return b;
}

const path = () => `/hook/${randomUUID()}`;

/** The value of a counter sample on a process's /metrics, by its `result` label (0 when absent). */
async function counter(metrics: string, name: string, result: string): Promise<number> {
  const text = await (await fetch(`${metrics}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`result="${result}"`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('the dispatcher process', () => {
  it('stops delivering to an account downgraded below Pro (subscriptions deactivated, reason tier_downgraded); fails open while the usage service is down', async () => {
    const grpcPort = await freePort();
    const usage = await startService('usage', {
      DATABASE_URL: db.database.url,
      REDIS_URL: testUrls.redis,
      REDIS_KEY_PREFIX: `${uniqueName('dp_tier')}:`,
      GRPC_PORT: String(grpcPort),
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
    });
    running.push(usage);
    const usageCli = (...args: string[]) =>
      JSON.parse(
        execFileSync(process.execPath, [resolve(repoRoot, 'services/usage/dist/cli.js'), ...args, '--json'], {
          env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.database.url },
          encoding: 'utf8',
        }),
      ) as { id: string };
    const pro = usageCli('accounts', 'create', '--name', 'to be downgraded', '--tier', 'pro');
    const enterprise = usageCli('accounts', 'create', '--name', 'stays', '--tier', 'enterprise');
    // The RPC itself: tiers of the accounts that exist, unknown ids left out; more than 1,000 ids refused.
    const client = createClient(UsageService, `127.0.0.1:${grpcPort}`, { callSecret: TEST_USAGE_GRPC_SECRET });
    try {
      const res = await client.unary.getAccounts(create(GetAccountsRequestSchema, { accountIds: [pro.id, 'acct_unknown', enterprise.id] }));
      const byId = (x: unknown[], y: unknown[]) => (String(x[0]) < String(y[0]) ? -1 : 1);
      expect(res.accounts.map((x) => [x.accountId, x.tier, x.tierRank]).sort(byId)).toEqual(
        [
          [pro.id, 'pro', 1],
          [enterprise.id, 'enterprise', 2],
        ].sort(byId),
      );
      const tooMany = await client.unary
        .getAccounts(create(GetAccountsRequestSchema, { accountIds: Array.from({ length: 1001 }, (_, i) => `acct_${i}`) }))
        .catch((err: unknown) => err as { code: number });
      expect((tooMany as { code: number }).code).toBe(grpc.status.INVALID_ARGUMENT);
    } finally {
      client.close();
    }
    const stream = uniqueName('DP_TIER').toUpperCase();
    // A 10 ms tier cache: each claim below asks the usage service again.
    const { metrics } = await start(
      env(stream, {
        USAGE_GRPC_ADDRESS: `127.0.0.1:${grpcPort}`,
        USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
        ENTITLEMENT_CACHE_TTL_MS: '10',
      }),
    );
    const facility = randomUUID();
    const [pa, pb] = [path(), path()];
    const a = await subscribe(db, { url: receiver.url(pa), facility_ids: [facility], account_id: pro.id });
    const b = await subscribe(db, { url: receiver.url(pb), facility_ids: [facility], account_id: enterprise.id });
    const events = await bus(stream);

    await events.publish(violationEvent(facility));
    await eventually(
      async () => [receiver.at(pa).length, receiver.at(pb).length],
      ([x, y]) => x === 1 && y === 1,
    );

    usageCli('accounts', 'set-tier', '--account', pro.id, '--tier', 'free');
    await events.publish(violationEvent(facility));
    await eventually(
      async () => receiver.at(pb).length,
      (n) => n === 2,
    );
    const state = async (id: string) =>
      (
        await db.pool.query<{ is_active: boolean; deactivation_reason: string | null }>(
          'SELECT is_active, deactivation_reason FROM webhook.subscriptions WHERE id = $1',
          [id],
        )
      ).rows[0];
    expect(
      await eventually(
        () => state(a.id),
        (s) => s?.is_active === false,
      ),
    ).toEqual({ is_active: false, deactivation_reason: 'tier_downgraded' });
    expect((await deliveriesOf(db, a.id)).map((d) => d.status)).toEqual(['succeeded', 'cancelled']);
    expect(receiver.at(pa)).toHaveLength(1);
    expect(await state(b.id)).toEqual({ is_active: true, deactivation_reason: null });
    const text = await (await fetch(`${metrics}/metrics`)).text();
    expect(text).toMatch(/fcd_dispatcher_tier_deactivations_total\{[^}]*\} 1\n/);

    // Usage down: tiers cannot be checked, so deliveries go out (fail open), even to an account downgraded meanwhile.
    await usage.stop('SIGKILL');
    usageCli('accounts', 'set-tier', '--account', enterprise.id, '--tier', 'free');
    await events.publish(violationEvent(facility));
    await eventually(
      async () => receiver.at(pb).length,
      (n) => n === 3,
    );
    expect(await state(b.id)).toEqual({ is_active: true, deactivation_reason: null });
    const after = await (await fetch(`${metrics}/metrics`)).text();
    expect(after).toMatch(/fcd_dispatcher_entitlement_unavailable_total\{[^}]*\} [1-9]/);
  });

  it('serves /healthz, /readyz (Postgres and NATS) and /metrics, and delivers over HTTPS trusting NODE_EXTRA_CA_CERTS', async () => {
    const stream = uniqueName('DP_BASIC').toUpperCase();
    const { base, metrics, svc } = await start(env(stream));
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = (await (await fetch(`${base}/readyz`)).json()) as { data: { checks: unknown } };
    expect(ready.data.checks).toEqual({ postgres: { status: 'up' }, nats: { status: 'up' } });
    const facility = randomUUID();
    const p = path();
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    const b = await bus(stream);
    await b.publish(violationEvent(facility));
    await eventually(
      async () => receiver.at(p).length,
      (n) => n === 1,
    );
    const text = await eventually(
      () => fetch(`${metrics}/metrics`).then((r) => r.text()),
      (t) => /fcd_dispatcher_attempts_total\{[^}]*result="success"[^}]*\} 1/.test(t),
    );
    for (const name of [
      'fcd_dispatcher_deliveries_total',
      'fcd_dispatcher_attempt_duration_seconds_bucket',
      'fcd_dispatcher_retries_scheduled_total',
      'fcd_dispatcher_deactivations_total',
      'fcd_dispatcher_consumer_pending',
      'fcd_dispatcher_event_to_first_attempt_seconds_bucket',
      'fcd_dispatcher_subscriptions_held',
      'fcd_dispatcher_rate_limited_late_starts_total',
    ]) {
      expect(text).toContain(name);
    }
    // Set by every claim, per limit (never per subscription).
    expect(text).toMatch(/fcd_dispatcher_subscriptions_held\{[^}]*limit="rate"[^}]*\} 0\n/);
    expect(text).toMatch(/fcd_dispatcher_subscriptions_held\{[^}]*limit="in_flight"[^}]*\} 0\n/);
    // Secrets and signatures never reach the logs.
    const all = svc.output.join('\n');
    expect(all).not.toContain(sub.secret);
    expect(all).not.toContain(receiver.at(p)[0]?.headers['x-service-signature']);
    expect(await svc.stop()).toBe(0);
  });

  it('SIGKILLed with a retry pending, restarted: the retry still happens, once', async () => {
    const stream = uniqueName('DP_KILL').toUpperCase();
    const e = env(stream, { WEBHOOK_RETRY_SCHEDULE: '2s,2s,2s,2s,2s', WEBHOOK_RETRY_JITTER_PERCENT: '0' });
    const first = await start(e);
    const facility = randomUUID();
    const p = path();
    receiver.behaviours.set(p, (_r, n) => (n === 1 ? 500 : 200));
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await (await bus(stream)).publish(violationEvent(facility));
    await eventually(
      () => attemptsOf(db, sub.id),
      (a) => a.length === 1,
    );
    await first.svc.stop('SIGKILL');
    await start(e);
    await eventually(
      () => deliveriesOf(db, sub.id),
      (d) => d[0]?.status === 'succeeded',
    );
    await sleep(500);
    const got = receiver.at(p);
    expect(got.map((r) => r.headers['x-service-delivery-attempt'])).toEqual(['1', '2']);
    expect((got[1]?.at ?? 0) - (got[0]?.at ?? 0)).toBeGreaterThanOrEqual(1980);
    expect((await attemptsOf(db, sub.id)).map((a) => a.outcome)).toEqual(['failure', 'success']);
  });

  it('two replicas share the consumer and the due work: both send, each delivery is sent once', async () => {
    const stream = uniqueName('DP_TWO').toUpperCase();
    // Two sends at a time per replica and a receiver answering after 50 ms: one replica alone would need
    // about a second for the 40 deliveries, so the other one's claims (woken every 100 ms) find due work.
    const e = env(stream, { DISPATCHER_CONCURRENCY: '2' });
    const replicas = [await start(e), await start(e)];
    const facility = randomUUID();
    const p = path();
    receiver.behaviours.set(p, () => ({ status: 204, delayMs: 50 }));
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    const b = await bus(stream);
    const events = Array.from({ length: 40 }, () => violationEvent(facility));
    await Promise.all(events.map((ev) => b.publish(ev)));
    await eventually(
      async () => receiver.at(p).length,
      (n) => n >= 40,
    );
    await sleep(500);
    const ids = receiver.at(p).map((r) => r.headers['x-service-event-id']);
    expect(ids).toHaveLength(40);
    expect(new Set(ids)).toEqual(new Set(events.map((ev) => ev.id)));
    expect(receiver.at(p).map((r) => r.headers['x-service-delivery-attempt'])).toEqual(Array(40).fill('1'));
    const deliveries = await deliveriesOf(db, sub.id);
    expect(deliveries.map((d) => [d.status, d.attempt_count])).toEqual(Array(40).fill(['succeeded', 1]));
    // Each replica made some of the 40 attempts, and together exactly 40 (nothing else is due in this database now).
    const perReplica = await eventually(
      () => Promise.all(replicas.map((r) => counter(r.metrics, 'fcd_dispatcher_attempts_total', 'success'))),
      (n) => n[0]! + n[1]! === 40,
    );
    expect(perReplica[0]).toBeGreaterThan(0);
    expect(perReplica[1]).toBeGreaterThan(0);
    const succeeded = await Promise.all(replicas.map((r) => counter(r.metrics, 'fcd_dispatcher_deliveries_total', 'succeeded')));
    expect(succeeded).toEqual(perReplica);
  });

  it('NATS restarted with events not yet consumed, and again under a connected dispatcher: no event is lost', async () => {
    const stream = uniqueName('DP_NATS').toUpperCase();
    const e = env(stream);
    const consumer = e.DISPATCHER_CONSUMER as string;
    const first = await start(e);
    const facility = randomUUID();
    const p = path();
    await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    const b = await bus(stream);
    // The stream and the durable consumer exist; then no dispatcher runs while the first events are published.
    expect(await first.svc.stop()).toBe(0);
    const before = Array.from({ length: 10 }, () => violationEvent(facility));
    for (const ev of before) await b.publish(ev);
    const info = await b.jsm.consumers.info(stream, consumer);
    expect([info.num_pending, info.num_ack_pending]).toEqual([10, 0]);
    expect(receiver.at(p)).toHaveLength(0);

    // NATS stops with the 10 events only in its stream; a dispatcher starts meanwhile (serves, not ready).
    await nats.stop();
    const second = await startService('dispatcher', e);
    running.push(second);
    const port = (second.logs().find((l) => l.msg === 'ready') as LogLine & { port: number }).port;
    const notReady = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(notReady.status).toBe(503);
    expect(
      ((await notReady.json()) as { error: { details: { checks: { nats: { status: string } } } } }).error.details.checks.nats.status,
    ).toBe('down');
    await nats.start();
    await eventually(
      async () => new Set(receiver.at(p).map((r) => r.headers['x-service-event-id'])).size,
      (n) => n === 10,
      20_000,
    );
    expect(new Set(receiver.at(p).map((r) => r.headers['x-service-event-id']))).toEqual(new Set(before.map((ev) => ev.id)));

    // Restarted again under the connected dispatcher: it reconnects and consumes what is published next.
    await nats.stop();
    await sleep(300);
    await nats.start();
    const after = Array.from({ length: 10 }, () => violationEvent(facility));
    for (const ev of after) {
      await eventually(
        () =>
          b.publish(ev).then(
            () => true,
            () => false,
          ),
        (ok) => ok,
      );
    }
    await eventually(
      async () => new Set(receiver.at(p).map((r) => r.headers['x-service-event-id'])).size,
      (n) => n === 20,
      20_000,
    );
    expect(new Set(receiver.at(p).map((r) => r.headers['x-service-event-id']))).toEqual(new Set([...before, ...after].map((ev) => ev.id)));
  });

  it('with private URLs disallowed, a subscription whose host is loopback is never contacted', async () => {
    const stream = uniqueName('DP_PRIV').toUpperCase();
    await start(env(stream, { WEBHOOK_ALLOW_PRIVATE_URLS: 'false' }));
    const facility = randomUUID();
    const p = path();
    const sub = await subscribe(db, { url: `https://localhost:${receiver.port}${p}`, facility_ids: [facility] });
    await (await bus(stream)).publish(violationEvent(facility));
    const attempts = await eventually(
      () => attemptsOf(db, sub.id),
      (a) => a.length >= 1,
    );
    expect(attempts[0]).toMatchObject({ outcome: 'failure', response_status: null });
    expect(attempts[0]?.error).toContain('url refused');
    expect(receiver.at(p)).toHaveLength(0);
  });

  it('with private URLs disallowed, a host name that resolves to 127.0.0.1 is never contacted: refused at connect time, not retried', async () => {
    const hosts = hostsPreloadEnv({ [REBIND_HOST]: '127.0.0.1' });
    const stream = uniqueName('DP_REBIND').toUpperCase();
    const url = (p: string) => `https://${REBIND_HOST}:${receiver.port}${p}`;

    // Control: the same name in the same process set-up with private destinations allowed reaches the receiver,
    // so the refusal below is the policy's doing, not a name that does not resolve or a receiver out of reach.
    const allowed = await start(env(stream, hosts));
    const controlFacility = randomUUID();
    const pc = path();
    await subscribe(db, { url: url(pc), facility_ids: [controlFacility] });
    const b = await bus(stream);
    const controlEvent = violationEvent(controlFacility);
    await b.publish(controlEvent);
    const [control] = await eventually(
      async () => receiver.at(pc),
      (r) => r.length === 1,
    );
    expect([control?.headers.host, control?.headers['x-service-event-id']]).toEqual([`${REBIND_HOST}:${receiver.port}`, controlEvent.id]);
    expect(await allowed.svc.stop()).toBe(0);

    // Disallowed (the default): the name passes the URL check, resolves to 127.0.0.1 at connect time and is refused:
    // a permanent failure, so the delivery stops after this one attempt (a one-hour schedule would otherwise keep it pending).
    const { svc, metrics } = await start(
      // The receiver's port is allowed, so what refuses the URL is the address it resolves to.
      env(stream, {
        ...hosts,
        WEBHOOK_ALLOW_PRIVATE_URLS: 'false',
        WEBHOOK_ALLOWED_PORTS: String(receiver.port),
        WEBHOOK_RETRY_SCHEDULE: '1h,1h,1h,1h,1h',
      }),
    );
    const facility = randomUUID();
    const p = path();
    const sub = await subscribe(db, { url: url(p), facility_ids: [facility] });
    const requestsBefore = receiver.requests.length;
    await b.publish(violationEvent(facility));
    const attempts = await eventually(
      () => attemptsOf(db, sub.id),
      (a) => a.length >= 1,
    );
    expect(attempts.map((a) => [a.attempt, a.outcome, a.response_status, a.error])).toEqual([
      [1, 'failure', null, `blocked: refused to connect to ${REBIND_HOST}: a loopback address`],
    ]);
    const settled = await eventually(
      async () => (await deliveriesOf(db, sub.id)).map((d) => [d.status, d.attempt_count]),
      (d) => d[0]?.[0] === 'failed',
    );
    expect(settled).toEqual([['failed', 1]]);
    // The log line and the metric follow the commit of the outcome: wait for them.
    const permanent = await eventually(
      async () => svc.logs().filter((l) => l.msg === 'delivery failed permanently: the destination is refused; not retried'),
      (l) => l.length >= 1,
    );
    expect(permanent).toHaveLength(1);
    expect(
      await eventually(
        () => counter(metrics, 'fcd_dispatcher_attempts_total', 'blocked'),
        (n) => n >= 1,
      ),
    ).toBe(1);
    expect(receiver.at(p)).toHaveLength(0);
    // Not one request reached the receiver's port while this dispatcher ran.
    expect(receiver.requests.slice(requestsBefore)).toEqual([]);
  });

  it('a 429 with Retry-After: 2 under a 1 s schedule is retried after 2 s, not 1 s', async () => {
    const stream = uniqueName('DP_RETRY_AFTER').toUpperCase();
    const { svc } = await start(env(stream, { WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s' }));
    const facility = randomUUID();
    const p = path();
    receiver.behaviours.set(p, (_r, n) => (n === 1 ? { status: 429, delayMs: 0, headers: { 'retry-after': '2' } } : 204));
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await (await bus(stream)).publish(violationEvent(facility));
    const [first, second] = await eventually(
      async () => receiver.at(p),
      (r) => r.length === 2,
      20_000,
    );
    // The 1 s schedule with its ±20 % jitter would have retried within 1.2 s; Retry-After holds it to 2 s.
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(2000);
    const scheduled = svc.logs().find((l) => l.msg === 'delivery attempt failed; retry scheduled' && l.subscription_id === sub.id);
    expect(scheduled).toMatchObject({ response_status: 429, retry_after_ms: 2000, attempt: 1 });
    const attempts = await eventually(
      () => attemptsOf(db, sub.id),
      (a) => a.length === 2,
    );
    expect(attempts.map((a) => [a.attempt, a.outcome, a.response_status])).toEqual([
      [1, 'failure', 429],
      [2, 'success', 204],
    ]);
  });

  it('SIGTERM finishes the send in flight, records it, and exits 0', async () => {
    const stream = uniqueName('DP_TERM').toUpperCase();
    const { svc } = await start(env(stream, { WEBHOOK_TIMEOUT_MS: '1500' }));
    const facility = randomUUID();
    const p = path();
    receiver.behaviours.set(p, () => 'hang');
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await (await bus(stream)).publish(violationEvent(facility));
    await eventually(
      async () => receiver.at(p).length,
      (n) => n === 1,
    );
    const code = await svc.stop('SIGTERM');
    expect(code).toBe(0);
    const attempts = await attemptsOf(db, sub.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]?.error).toBe('timed out waiting for the response');
  });
});
