import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { eventually, freePort, type LogLine, repoRoot, type ServiceProcess, startService, uniqueName } from '@fcd/testing';
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
      req.on('end', () => {
        setTimeout(() => {
          // Closed before the answer leaves: the dispatcher may start the next request as soon as it reads it.
          this.open.set(path, (this.open.get(path) ?? 1) - 1);
          res.writeHead(204).end();
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
  execFileSync('npm', ['run', 'build', '-w', '@fcd/dispatcher'], { cwd: repoRoot, stdio: 'ignore' });
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

function env(stream: string): Record<string, string> {
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
  };
}

/** Two dispatcher replicas on one stream, both ready, and a bus to publish on. */
async function twoReplicas(stream: string): Promise<Bus> {
  for (let i = 0; i < 2; i++) {
    const svc = await startService('dispatcher', env(stream));
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
