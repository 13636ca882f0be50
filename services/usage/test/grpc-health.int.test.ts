import { grpc } from '@fcd/grpc';
import { UsageService } from '@fcd/proto';
import {
  createTestDatabase,
  freePort,
  PrivateRedis,
  type ServiceProcess,
  startService,
  TEST_USAGE_GRPC_SECRET,
  type TestDatabase,
  uniqueName,
} from '@fcd/testing';
import { service as healthService } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * grpc.health.v1.Health of the usage service process (services/usage/src/service.ts):
 * "" and usage.v1.UsageService are SERVING when Postgres answers and Redis answers
 * (or fail-open is on) and the process is not shutting down; "postgres" and "redis"
 * report each store. The statuses are refreshed every second and at shutdown, and a
 * Watch stream receives each refresh, so the tests wait for messages, not for time.
 */

type Status = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
type HealthClient = grpc.Client & {
  check(req: { service: string }, opts: { deadline: number }, cb: (err: grpc.ServiceError | null, res?: { status: Status }) => void): void;
  list(
    req: object,
    opts: { deadline: number },
    cb: (err: grpc.ServiceError | null, res?: { statuses: Record<string, { status: Status }> }) => void,
  ): void;
  watch(req: { service: string }): grpc.ClientReadableStream<{ status: Status }>;
};

const SERVICE = UsageService.typeName;
const WAIT_MS = 20_000;

function healthClient(port: number): HealthClient {
  const Ctor = grpc.makeGenericClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'Health');
  return new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as HealthClient;
}

function check(client: HealthClient, service: string): Promise<Status> {
  return new Promise((resolve, reject) =>
    client.check({ service }, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res?.status as Status))),
  );
}

async function checkAll(client: HealthClient): Promise<Record<string, Status>> {
  const names = ['', SERVICE, 'postgres', 'redis'];
  const statuses = await Promise.all(names.map((n) => check(client, n)));
  return Object.fromEntries(names.map((n, i) => [n, statuses[i] as Status]));
}

/** A Watch stream: every status the server sent, and a way to wait for the next one that matches. */
class Watch {
  readonly statuses: Status[] = [];
  private readonly call: grpc.ClientReadableStream<{ status: Status }>;
  private readonly waiters: Array<{ status: Status; resolve: () => void }> = [];

  constructor(
    client: HealthClient,
    readonly service: string,
  ) {
    this.call = client.watch({ service });
    this.call.on('data', (m: { status: Status }) => {
      this.statuses.push(m.status);
      for (const w of [...this.waiters]) {
        if (w.status === m.status) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve();
        }
      }
    });
    this.call.on('error', () => undefined); // CANCELLED when the test cancels, UNAVAILABLE when the server goes
  }

  /** Resolves at the next message with this status (or the last one received, if `orLast`). */
  next(status: Status, orLast = false): Promise<void> {
    if (orLast && this.statuses.at(-1) === status) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`watch "${this.service}": no ${status} within ${WAIT_MS} ms; got ${this.statuses.join(',')}`)),
        WAIT_MS,
      );
      this.waiters.push({
        status,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  cancel(): void {
    this.call.cancel();
  }
}

let db: TestDatabase;
let redis: PrivateRedis;
const processes: ServiceProcess[] = [];
const clients: HealthClient[] = [];

async function startUsage(env: Record<string, string> = {}): Promise<{ usage: ServiceProcess; health: HealthClient }> {
  const grpcPort = await freePort();
  const usage = await startService('usage', {
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `${uniqueName('grpc_health')}:`,
    GRPC_PORT: String(grpcPort),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
    ...env,
  });
  processes.push(usage);
  const health = healthClient(grpcPort);
  clients.push(health);
  return { usage, health };
}

let usage: ServiceProcess;
let health: HealthClient;
let failOpenHealth: HealthClient;

beforeAll(async () => {
  db = await createTestDatabase('usage_grpc_health');
  redis = await PrivateRedis.start();
  ({ usage, health } = await startUsage());
  ({ health: failOpenHealth } = await startUsage({ USAGE_FAIL_OPEN: 'true' }));
});

afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all(processes.map((p) => p.stop()));
  await redis?.stop();
  await db?.drop();
});

describe('usage service gRPC health (grpc.health.v1.Health, real process)', () => {
  it('is SERVING for "" and usage.v1.UsageService, and for each store, as soon as it logs ready', async () => {
    // `ready` waits for the first health report, which waits for Redis's first connection: no wait here.
    const serving = { '': 'SERVING', [SERVICE]: 'SERVING', postgres: 'SERVING', redis: 'SERVING' };
    expect(await checkAll(health)).toEqual(serving);
    expect(await checkAll(failOpenHealth)).toEqual(serving);
    const listed = await new Promise((resolve, reject) =>
      health.list({}, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res?.statuses))),
    );
    expect(listed).toEqual({
      '': { status: 'SERVING' },
      [SERVICE]: { status: 'SERVING' },
      postgres: { status: 'SERVING' },
      redis: { status: 'SERVING' },
    });
    await expect(check(health, 'usage.v1.Nope')).rejects.toMatchObject({
      code: grpc.status.NOT_FOUND,
      details: 'Health status unknown for service usage.v1.Nope',
    });
  });

  it('is NOT_SERVING (redis NOT_SERVING, postgres SERVING) while Redis is unreachable and SERVING again when it returns; fail-open keeps serving', async () => {
    const whole = new Watch(health, '');
    const failOpenRedis = new Watch(failOpenHealth, 'redis');
    try {
      await Promise.all([whole.next('SERVING', true), failOpenRedis.next('SERVING', true)]);

      await redis.stop();
      await Promise.all([whole.next('NOT_SERVING'), failOpenRedis.next('NOT_SERVING')]);
      expect(await checkAll(health)).toEqual({ '': 'NOT_SERVING', [SERVICE]: 'NOT_SERVING', postgres: 'SERVING', redis: 'NOT_SERVING' });
      // USAGE_FAIL_OPEN=true: requests are counted in Postgres, so the service stays ready; the store is still named.
      expect(await checkAll(failOpenHealth)).toEqual({ '': 'SERVING', [SERVICE]: 'SERVING', postgres: 'SERVING', redis: 'NOT_SERVING' });

      await redis.start();
      await Promise.all([whole.next('SERVING'), failOpenRedis.next('SERVING')]);
      const serving = { '': 'SERVING', [SERVICE]: 'SERVING', postgres: 'SERVING', redis: 'SERVING' };
      expect(await checkAll(health)).toEqual(serving);
      expect(await checkAll(failOpenHealth)).toEqual(serving);
    } finally {
      whole.cancel();
      failOpenRedis.cancel();
    }
  });

  it('turns "" and usage.v1.UsageService NOT_SERVING as soon as SIGTERM starts the shutdown, never back, then exits 0', async () => {
    const watches = ['', SERVICE, 'postgres', 'redis'].map((s) => new Watch(health, s));
    const [whole, named, pgWatch, redisWatch] = watches as [Watch, Watch, Watch, Watch];
    await Promise.all(watches.map((w) => w.next('SERVING', true)));

    usage.proc.kill('SIGTERM');
    await Promise.all([whole.next('NOT_SERVING'), named.next('NOT_SERVING')]);
    // The watches hold the server open (it drains in-flight calls for up to 5 s): let go, so it stops now.
    for (const w of watches) w.cancel();
    expect(await usage.exited).toBe(0);

    expect(usage.logs().map((l) => l.msg)).toEqual(expect.arrayContaining(['shutting down', 'shutdown complete']));
    for (const w of [whole, named]) expect(w.statuses.join(' ')).toMatch(/^(SERVING )+(NOT_SERVING ?)+$/);
    // Shutting down says nothing about the stores: they stayed SERVING in every update.
    for (const w of [pgWatch, redisWatch]) expect(new Set(w.statuses)).toEqual(new Set(['SERVING']));
  });
});
