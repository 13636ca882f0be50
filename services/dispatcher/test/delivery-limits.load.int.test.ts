import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { eventually, freePort, type LogLine, type ServiceProcess, startService, uniqueName } from '@fcd/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type Bus,
  deliveriesOf,
  openBus,
  PrivateNats,
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
 * Per-subscription limits (docs/adr/0014-per-subscription-delivery-limits.md) measured where they
 * matter, at the receiver, with two built dispatcher processes sharing the due work.
 */

/** An HTTPS receiver that records, per path, each request's arrival time and how many were open at once. */
class CountingReceiver {
  readonly arrivals = new Map<string, number[]>();
  readonly maxOpen = new Map<string, number>();
  private readonly open = new Map<string, number>();
  private readonly delays = new Map<string, number>();
  /** The answer to the n-th request (1-based) of a path: a status with headers, or 'hang' (never answers). */
  readonly answers = new Map<string, (n: number) => { status: number; headers?: Record<string, string> } | 'hang'>();
  private readonly server: Server;
  port = 0;

  constructor(tls: { cert: string; key: string }) {
    this.server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      const path = req.url ?? '';
      const now = this.open.get(path) ?? 0;
      this.open.set(path, now + 1);
      this.maxOpen.set(path, Math.max(this.maxOpen.get(path) ?? 0, now + 1));
      this.arrivals.set(path, [...(this.arrivals.get(path) ?? []), performance.now()]);
      req.resume();
      const n = this.arrivals.get(path)?.length ?? 0;
      const answer = this.answers.get(path)?.(n) ?? { status: 204 };
      req.on('end', () => {
        if (answer === 'hang') return;
        setTimeout(() => {
          // Closed before the answer leaves: the dispatcher may start the next request as soon as it reads it.
          this.open.set(path, (this.open.get(path) ?? 1) - 1);
          res.writeHead(answer.status, answer.headers).end();
        }, this.delays.get(path) ?? 0);
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
  }

  path(delayMs = 0): string {
    const p = `/limits/${randomUUID()}`;
    this.delays.set(p, delayMs);
    return p;
  }

  url(path: string): string {
    return `https://127.0.0.1:${this.port}${path}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/** The most arrivals in any window [t, t + windowMs) that starts at an arrival. */
function maxInWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let max = 0;
  let j = 0;
  for (let i = 0; i < sorted.length; i++) {
    while ((sorted[i] as number) - (sorted[j] as number) >= windowMs) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

let db: TestDb;
let nats: PrivateNats;
let receiver: CountingReceiver;
let cert: ReturnType<typeof testCertificate>;
const running: ServiceProcess[] = [];
const buses: Bus[] = [];

beforeAll(async () => {
  cert = testCertificate();
  db = await setupDb('dispatcher_limits');
  nats = new PrivateNats(await freePort());
  await nats.start();
  receiver = new CountingReceiver(cert);
  await receiver.start();
}, 120_000);

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
    DISPATCHER_CONCURRENCY: '8',
    NODE_EXTRA_CA_CERTS: cert.certFile,
    ...extra,
  };
}

/** Two dispatcher replicas on one stream, both ready, and a bus to publish on. */
async function twoReplicas(stream: string, extra: Record<string, string> = {}): Promise<Bus> {
  for (let i = 0; i < 2; i++) {
    const svc = await startService('dispatcher', env(stream, extra));
    running.push(svc);
    const ready = svc.logs().find((l) => l.msg === 'ready') as LogLine & { port: number };
    await eventually(
      () => fetch(`http://127.0.0.1:${ready.port}/readyz`).then((r) => r.status),
      (s) => s === 200,
    );
  }
  const b = await openBus(stream, nats.url);
  buses.push(b);
  return b;
}

async function setLimits(id: string, rate: number | null, maxInFlight: number): Promise<void> {
  await db.pool.query('UPDATE webhook.subscriptions SET rate_limit_per_second = $2, max_in_flight = $3 WHERE id = $1', [
    id,
    rate,
    maxInFlight,
  ]);
}

describe('per-subscription delivery limits, two dispatcher replicas', () => {
  it('rate_limit_per_second 5: all 60 events arrive, never more than 5 in any one-second window at the receiver', async () => {
    const stream = uniqueName('DL_RATE').toUpperCase();
    const b = await twoReplicas(stream);
    const facility = randomUUID();
    const p = receiver.path();
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await setLimits(sub.id, 5, 64);
    const events = Array.from({ length: 60 }, () => violationEvent(facility));
    await Promise.all(events.map((ev) => b.publish(ev)));
    await eventually(
      async () => receiver.arrivals.get(p)?.length ?? 0,
      (n) => n >= 60,
      30_000,
    );
    await sleep(500);
    const arrivals = receiver.arrivals.get(p) ?? [];
    expect(arrivals).toHaveLength(60);
    expect(maxInWindow(arrivals, 1000)).toBeLessThanOrEqual(5);
    // The limit is used, not just respected: 60 at 5/s take about 12 s (spaced 220 ms: 13 s).
    const span = Math.max(...arrivals) - Math.min(...arrivals);
    expect(span).toBeGreaterThanOrEqual(59 * 200);
    expect(span).toBeLessThan(20_000);
    // Held deliveries used no attempt: each was sent once.
    const deliveries = await deliveriesOf(db, sub.id);
    expect(deliveries.map((d) => [d.status, d.attempt_count])).toEqual(Array(60).fill(['succeeded', 1]));
  }, 60_000);

  it('max_in_flight 2: the receiver never sees a third concurrent request', async () => {
    const stream = uniqueName('DL_FLIGHT').toUpperCase();
    const b = await twoReplicas(stream);
    const facility = randomUUID();
    const p = receiver.path(150);
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await setLimits(sub.id, null, 2);
    const events = Array.from({ length: 30 }, () => violationEvent(facility));
    await Promise.all(events.map((ev) => b.publish(ev)));
    await eventually(
      async () => receiver.arrivals.get(p)?.length ?? 0,
      (n) => n >= 30,
      30_000,
    );
    await sleep(300);
    expect(receiver.arrivals.get(p)).toHaveLength(30);
    expect(receiver.maxOpen.get(p)).toBe(2);
    const deliveries = await deliveriesOf(db, sub.id);
    expect(deliveries.map((d) => [d.status, d.attempt_count])).toEqual(Array(30).fill(['succeeded', 1]));
  }, 60_000);
});

describe('endpoint back-off, two dispatcher replicas', () => {
  it('a 429 with Retry-After: 3 pauses the whole subscription for 3 s, then the backlog resumes; the delivery log shows it', async () => {
    const stream = uniqueName('DL_429').toUpperCase();
    const b = await twoReplicas(stream);
    const facility = randomUUID();
    const p = receiver.path();
    receiver.answers.set(p, (n) => (n === 1 ? { status: 429, headers: { 'retry-after': '3' } } : { status: 204 }));
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    // One at a time, so no other request is already out when the 429 comes back.
    await setLimits(sub.id, null, 1);
    const events = Array.from({ length: 10 }, () => violationEvent(facility));
    await Promise.all(events.map((ev) => b.publish(ev)));
    await eventually(
      async () => receiver.arrivals.get(p)?.length ?? 0,
      (n) => n >= 11,
      20_000,
    );
    await sleep(300);
    const arrivals = [...(receiver.arrivals.get(p) ?? [])].sort((x, y) => x - y);
    expect(arrivals).toHaveLength(11);
    const [first, second] = arrivals as [number, number];
    expect(second - first).toBeGreaterThanOrEqual(3000);
    // Then the backlog (10 deliveries, the 429'd one included) goes out at once, one at a time.
    expect((arrivals[10] as number) - second).toBeLessThan(2000);
    const deliveries = await deliveriesOf(db, sub.id);
    expect(deliveries.map((d) => d.status)).toEqual(Array(10).fill('succeeded'));
    const { rows } = await db.pool.query<{
      response_status: number;
      pause_reason: string | null;
      paused_until: Date | null;
      started_at: Date;
    }>(
      `SELECT a.response_status, a.pause_reason, a.paused_until, a.started_at FROM webhook.delivery_attempts a
         JOIN webhook.deliveries d ON d.id = a.delivery_id WHERE d.subscription_id = $1 ORDER BY a.started_at`,
      [sub.id],
    );
    expect(rows.map((r) => [r.response_status, r.pause_reason])).toEqual([[429, 'retry_after'], ...Array(10).fill([204, null])]);
    const pausedFor = (rows[0]?.paused_until?.getTime() ?? 0) - (rows[0]?.started_at.getTime() ?? 0);
    expect(pausedFor).toBeGreaterThanOrEqual(3000);
    expect(pausedFor).toBeLessThan(3500);
  }, 60_000);

  it('a receiver that times out repeatedly is paused, then probed one delivery at a time', async () => {
    const stream = uniqueName('DL_PROBE').toUpperCase();
    const b = await twoReplicas(stream, {
      WEBHOOK_TIMEOUT_MS: '300',
      WEBHOOK_BREAKER_THRESHOLD: '3',
      WEBHOOK_BREAKER_COOLDOWN_MS: '200',
      WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms',
      WEBHOOK_RETRY_JITTER_PERCENT: '0',
    });
    const facility = randomUUID();
    const p = receiver.path();
    receiver.answers.set(p, () => 'hang');
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await setLimits(sub.id, null, 8);
    // When the circuit opened: the first moment its pause is seen committed. The breaker opens when
    // the third failure is recorded, not when it ends: attempts claimed in between (a loaded machine
    // makes that gap hundreds of ms) are still the closed circuit's, several at once.
    let openedAt: number | undefined;
    const watching = (async () => {
      for (const until = Date.now() + 30_000; openedAt === undefined && Date.now() < until; await sleep(10)) {
        const r = await db.pool.query<{ paused: boolean }>(
          'SELECT paused_until IS NOT NULL AS paused FROM webhook.subscriptions WHERE id = $1',
          [sub.id],
        );
        if (r.rows[0]?.paused) openedAt = Date.now();
      }
    })();
    const events = Array.from({ length: 12 }, () => violationEvent(facility));
    await Promise.all(events.map((ev) => b.publish(ev)));
    type Attempt = { started_at: Date; duration_ms: number; error: string; pause_reason: string | null };
    const attempts = async () =>
      (
        await db.pool.query<Attempt>(
          `SELECT a.started_at, a.duration_ms, a.error, a.pause_reason FROM webhook.delivery_attempts a
             JOIN webhook.deliveries d ON d.id = a.delivery_id WHERE d.subscription_id = $1 ORDER BY a.started_at`,
          [sub.id],
        )
      ).rows;
    const all = await eventually(attempts, (a) => a.findIndex((x) => x.pause_reason === 'unreachable') >= 0 && a.length >= 20, 30_000);
    expect(all.every((a) => a.error === 'timed out waiting for the response')).toBe(true);
    // Before the circuit opened, several were out at once (max_in_flight 8)...
    const end = (a: Attempt) => a.started_at.getTime() + a.duration_ms;
    await watching;
    expect(openedAt).toBeDefined();
    const overlapping = all.filter((a) => a.started_at.getTime() < (all[0] as Attempt).started_at.getTime() + 300);
    expect(overlapping.length).toBeGreaterThan(1);
    // ...after it, the probes never overlap, and each failing one pauses the subscription again.
    const probes = all.filter((a) => a.started_at.getTime() >= (openedAt as number));
    expect(probes.length).toBeGreaterThanOrEqual(5);
    for (let i = 1; i < probes.length; i++) {
      expect((probes[i] as Attempt).started_at.getTime()).toBeGreaterThanOrEqual(end(probes[i - 1] as Attempt) - 2);
    }
    expect(probes.every((a) => a.pause_reason === 'unreachable')).toBe(true);
    expect(receiver.maxOpen.get(p)).toBeGreaterThan(1);
  }, 60_000);
});
