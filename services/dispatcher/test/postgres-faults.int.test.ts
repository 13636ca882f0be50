import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, createPool, migrate } from '@fcd/service-kit';
import { FaultProxy, freePort, type LogLine, PrivatePostgres, type ServiceProcess, startService } from '@fcd/testing';
import { SubscriptionStore, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Bus,
  openBus,
  PrivateNats,
  Receiver,
  SECRET_KEY,
  secretBox,
  sleep,
  subscribe,
  type TestDb,
  testCertificate,
  violationEvent,
} from './helpers';

/**
 * The built dispatcher against a private Postgres cluster that the test stops,
 * cuts (pg_terminate_backend: a failover as a client sees it) and black-holes
 * (through a fault proxy), under light load: events keep arriving while the
 * dispatcher claims and records deliveries in transactions.
 */
let pgs: PrivatePostgres;
let proxy: FaultProxy;
let nats: PrivateNats;
let receiver: Receiver;
let cert: ReturnType<typeof testCertificate>;
let db: TestDb;
let svc: ServiceProcess;
let base: string;
let events: Bus;
const DB = 'dispatcher_faults';
const facility = randomUUID();
const hook = `/hook/${randomUUID()}`;
const published: string[] = [];

beforeAll(async () => {
  cert = testCertificate();
  pgs = await PrivatePostgres.start();
  await pgs.createDatabase(DB);
  proxy = await FaultProxy.start({ port: pgs.port });
  const pool = createPool({
    connectionString: pgs.url(DB),
    applicationName: 'dispatcher-test',
    logger: createLogger({ service: 't', level: 'silent' }),
  });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  db = {
    database: { url: pgs.url(DB), name: DB, drop: async () => undefined },
    pool,
    subscriptions: new SubscriptionStore(pool, secretBox),
  };
  nats = new PrivateNats(await freePort());
  await nats.start();
  receiver = new Receiver(cert);
  await receiver.start();
  await subscribe(db, { url: receiver.url(hook), facility_ids: [facility] });
  const stream = `PGF_${randomUUID().slice(0, 8)}`.toUpperCase();
  svc = await startService('dispatcher', {
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: `postgres://postgres@127.0.0.1:${proxy.port}/${DB}`,
    NATS_URL: nats.url,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    DISPATCHER_CONSUMER: `c_${stream}`,
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms',
    DISPATCHER_POLL_MS: '50',
    PG_CONNECT_TIMEOUT_MS: '1000',
    PG_QUERY_TIMEOUT_MS: '2000',
    NODE_EXTRA_CA_CERTS: cert.certFile,
  });
  const ready = svc.logs().find((l) => l.msg === 'ready') as LogLine & { port: number };
  base = `http://127.0.0.1:${ready.port}`;
  events = await openBus(stream, nats.url);
  await waitFor(async () => (await readyz()).status === 200, 15_000);
}, 120_000);

afterAll(async () => {
  await svc?.stop('SIGKILL');
  await events?.nc.close().catch(() => undefined);
  await receiver?.close();
  await nats?.stop();
  if (nats) rmSync(nats.dir, { recursive: true, force: true });
  await db?.pool.end().catch(() => undefined);
  await proxy?.close();
  await pgs?.destroy();
});

async function readyz(): Promise<{ status: number; postgres?: string }> {
  const r = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(10_000) });
  type Checks = { checks?: { postgres?: { status: string } } };
  const body = (await r.json()) as { data?: Checks; error?: { code: string; details?: Checks } };
  if (r.status === 503) {
    // The documented error envelope, with Retry-After.
    expect(body.error?.code).toBe('SERVICE_UNAVAILABLE');
    expect(r.headers.get('retry-after')).toBe('1');
  }
  return { status: r.status, postgres: (body.data ?? body.error?.details)?.checks?.postgres?.status };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > until)
      throw new Error(`condition not met in ${timeoutMs} ms; dispatcher output:\n${svc.output.slice(-15).join('\n')}`);
    await sleep(100);
  }
}

/** Publishes one matching event every `everyMs` until stopped (light load). */
function load(everyMs = 40): () => Promise<void> {
  let on = true;
  const done = (async () => {
    while (on) {
      const e = violationEvent(facility);
      const ok = await events.publish(e).then(
        () => true,
        () => false,
      );
      if (ok) published.push(e.id);
      await sleep(everyMs);
    }
  })();
  return async () => {
    on = false;
    await done;
  };
}

function alive(): void {
  expect(svc.proc.exitCode, `dispatcher exited; output:\n${svc.output.slice(-15).join('\n')}`).toBeNull();
  expect(svc.proc.signalCode).toBeNull();
}

/** Every published event reached the receiver (at least once, same event id). */
async function allDelivered(): Promise<void> {
  await waitFor(async () => {
    const got = new Set(receiver.at(hook).map((r) => (JSON.parse(r.body) as { id: string }).id));
    return published.every((id) => got.has(id));
  }, 30_000);
}

describe('the dispatcher process through Postgres faults', () => {
  it('survives terminate-all (a failover) while it holds clients in transactions, and loses no event', async () => {
    const stop = load();
    await waitFor(async () => receiver.at(hook).length >= 5, 15_000);
    for (let i = 0; i < 15; i++) {
      await pgs.terminateBackends(DB);
      await sleep(150);
    }
    await stop();
    await sleep(500);
    alive();
    await waitFor(async () => (await readyz()).status === 200, 10_000);
    await allDelivered();
    alive();
  }, 90_000);

  it('survives a fast stop and start: readyz reports postgres down, then recovers by itself; no event lost', async () => {
    const stop = load();
    await sleep(500);
    await pgs.stopFast();
    await waitFor(async () => {
      const r = await readyz();
      return r.status === 503 && r.postgres === 'down';
    }, 10_000);
    await sleep(2000);
    alive();
    await pgs.start();
    await stop();
    await waitFor(async () => (await readyz()).status === 200, 15_000);
    await allDelivered();
    alive();
  }, 90_000);

  it('survives black-holed Postgres traffic: readyz answers down within its timeouts, then recovers', async () => {
    const stop = load();
    await sleep(300);
    proxy.blackhole();
    const t0 = Date.now();
    const during = await readyz();
    expect(Date.now() - t0).toBeLessThan(8000);
    expect(during).toEqual({ status: 503, postgres: 'down' });
    await sleep(6000);
    alive();
    proxy.heal();
    await stop();
    await waitFor(async () => (await readyz()).status === 200, 15_000);
    await allDelivered();
    alive();
  }, 90_000);

  it('an unexpected error is logged as one fatal line (no credentials) and the process exits 70', async () => {
    // A preload that throws outside any handler once the service runs: what a missing listener does.
    const preload = join(tmpdir(), `throw-${randomUUID()}.mjs`);
    writeFileSync(preload, "process.on('SIGUSR2', () => { throw new Error('forced: postgres://app:hunter2@db:5432/x unreachable'); });\n");
    const crashing = await startService('dispatcher', {
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: pgs.url(DB),
      NATS_URL: nats.url,
      EVENTS_STREAM: `PGG_${randomUUID().slice(0, 8)}`.toUpperCase(),
      WEBHOOK_SECRET_KEY: SECRET_KEY,
      NODE_OPTIONS: `--import ${preload}`,
    });
    crashing.proc.kill('SIGUSR2');
    expect(await crashing.exited).toBe(70);
    const fatal = crashing.logs().filter((l) => l.msg === 'unexpected error; exiting');
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toMatchObject({
      msg: 'unexpected error; exiting',
      origin: 'uncaughtException',
      err: { name: 'Error', message: 'forced: postgres://***@db:5432/x unreachable' },
    });
    expect(crashing.output.join('\n')).not.toContain('hunter2');
  });
});
