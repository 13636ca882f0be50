import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort, repoRoot, type ServiceProcess, startService } from './process';
import { createTestDatabase, type TestDatabase, testUrls, uniqueName } from './services';

const run = promisify(execFile);

export const TEST_INTERNAL_AUTH_SECRET = 'test-internal-auth-secret-0123456789abcdef';
/** Keys the per-call tokens of gRPC calls to the usage service (USAGE_GRPC_SECRET). */
export const TEST_USAGE_GRPC_SECRET = 'test-usage-grpc-secret-0123456789abcdef012';

export interface StackOptions {
  label: string;
  gateways?: number;
  redisUrl?: string;
  /** A Redis Cluster's `host:port` nodes (REDIS_CLUSTER_NODES) instead of a Redis URL. */
  redisClusterNodes?: string[];
  usageEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** Base URLs of domain services the gateway routes to (default: closed ports). */
  facilityUrl?: string;
  webhookUrl?: string;
  /** Reuse an existing database instead of creating one. */
  database?: TestDatabase;
  /** false: the processes run without `--enable-source-maps`, as the chart runs them (startService). */
  sourceMaps?: boolean;
}

export interface TestAccount {
  accountId: string;
  apiKey: string;
  keyId: string;
}

export interface Stack {
  db: TestDatabase;
  redisPrefix: string;
  usage: ServiceProcess;
  usageEnv: Record<string, string>;
  gateways: ServiceProcess[];
  gatewayUrls: string[];
  /** Runs the usage admin CLI against the stack's database and returns its JSON output. */
  cli(args: string[]): Promise<unknown>;
  createAccount(tier: 'free' | 'pro' | 'enterprise'): Promise<TestAccount>;
  /** Requests of an account persisted in Postgres (all days). */
  storedCount(accountId: string): Promise<number>;
  restartUsage(signal?: NodeJS.Signals): Promise<ServiceProcess>;
  stop(): Promise<void>;
}

/** The env of a gateway process on loopback: its usage service's gRPC port, domain services (default: closed ports). */
export async function gatewayEnv(
  usageGrpcPort: number | string,
  urls: { facilityUrl?: string; webhookUrl?: string; redisPrefix?: string } = {},
) {
  return {
    USAGE_GRPC_ADDRESS: `127.0.0.1:${usageGrpcPort}`,
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
    FACILITY_URL: urls.facilityUrl ?? `http://127.0.0.1:${await freePort()}`,
    WEBHOOK_URL: urls.webhookUrl ?? `http://127.0.0.1:${await freePort()}`,
    // Idempotency-Key records: always the shared test Redis (a test that stops its usage service's Redis keeps these).
    REDIS_URL: testUrls.redis,
    REDIS_KEY_PREFIX: urls.redisPrefix ?? `${uniqueName('gateway')}:`,
  };
}

/** The usage service's env: the stack's database, Redis (or cluster) and key prefix, short flush and cache times. */
function stackUsageEnv(options: StackOptions, db: TestDatabase, redisPrefix: string, grpcPort: number): Record<string, string> {
  return {
    DATABASE_URL: db.url,
    ...db.env,
    ...(options.redisClusterNodes
      ? { REDIS_CLUSTER_NODES: options.redisClusterNodes.join(',') }
      : { REDIS_URL: options.redisUrl ?? testUrls.redis }),
    REDIS_KEY_PREFIX: redisPrefix,
    GRPC_PORT: String(grpcPort),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    USAGE_FLUSH_INTERVAL_MS: '200',
    KEY_CACHE_TTL_MS: '200',
    KEY_CACHE_NEGATIVE_TTL_MS: '200',
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
    ...options.usageEnv,
  };
}

/** The stack's gateways, each ready; on a failure, the ones that started are killed. */
async function startGateways(
  options: StackOptions,
  grpcPort: number,
  redisPrefix: string,
): Promise<{ gateways: ServiceProcess[]; gatewayUrls: string[] }> {
  const gateways: ServiceProcess[] = [];
  try {
    for (let i = 0; i < (options.gateways ?? 1); i++) {
      gateways.push(
        await startService(
          'gateway',
          { ...(await gatewayEnv(grpcPort, { ...options, redisPrefix })), ...options.gatewayEnv },
          { sourceMaps: options.sourceMaps },
        ),
      );
    }
    const gatewayUrls = await Promise.all(
      gateways.map(async (g) => `http://127.0.0.1:${(await g.waitForLog((l) => l.msg === 'ready')).port as number}`),
    );
    return { gateways, gatewayUrls };
  } catch (err) {
    // A gateway that did not come up: stop what did, so no process outlives the failed test file.
    await Promise.allSettled(gateways.map((g) => g.stop('SIGKILL')));
    throw err;
  }
}

/** Starts a usage service and N gateways on a fresh database and Redis key prefix. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const db = options.database ?? (await createTestDatabase(options.label));
  const redisPrefix = `${uniqueName(options.label)}:`;
  const grpcPort = await freePort();
  const usageEnv = stackUsageEnv(options, db, redisPrefix, grpcPort);
  let usage = await startService('usage', usageEnv, { sourceMaps: options.sourceMaps }).catch(async (err: unknown) => {
    if (!options.database) await db.drop().catch(() => undefined);
    throw err;
  });
  let gateways: ServiceProcess[];
  let gatewayUrls: string[];
  try {
    ({ gateways, gatewayUrls } = await startGateways(options, grpcPort, redisPrefix));
  } catch (err) {
    await usage.stop('SIGKILL').catch(() => undefined);
    if (!options.database) await db.drop().catch(() => undefined);
    throw err;
  }
  const cli = async (args: string[]) => {
    const { stdout } = await run(process.execPath, [resolve(repoRoot, 'services/usage/dist/cli.js'), ...args, '--json'], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, ...db.env },
    });
    return JSON.parse(stdout) as unknown;
  };
  return {
    db,
    redisPrefix,
    get usage() {
      return usage;
    },
    usageEnv,
    gateways,
    gatewayUrls,
    cli,
    async createAccount(tier) {
      const account = (await cli(['accounts', 'create', '--name', `test ${tier}`, '--tier', tier])) as { id: string };
      const key = (await cli(['keys', 'create', '--account', account.id])) as { id: string; apiKey: string };
      return { accountId: account.id, apiKey: key.apiKey, keyId: key.id };
    },
    async storedCount(accountId) {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ n: number }>(
          'SELECT COALESCE(SUM(request_count), 0)::int AS n FROM usage.daily_usage WHERE account_id = $1',
          [accountId],
        );
        return rows[0]?.n ?? 0;
      } finally {
        await client.end();
      }
    },
    async restartUsage(signal = 'SIGTERM') {
      await usage.stop(signal);
      usage = await startService('usage', usageEnv, { sourceMaps: options.sourceMaps });
      return usage;
    },
    async stop() {
      await Promise.all(gateways.map((g) => g.stop()));
      await usage.stop();
      if (!options.database) await db.drop();
    },
  };
}

export const TEST_INGEST_TOKEN = 'test-ingest-token-0123456789abcdef0123456789';

/** A new significant CAA violation of a facility, as the ingestion API takes it (a `violation.new` event). */
export function violationRow(registryId: string): Record<string, string> {
  return {
    source_id: `V-${randomUUID()}`,
    registry_id: registryId,
    program: 'CAA',
    violation_type: 'emissions_exceedance',
    violation_date: '2026-11-20',
    severity: 'significant',
  };
}

export interface ApiStackOptions {
  label: string;
  /** Base64 of the 32-byte key the webhook service encrypts secrets with. */
  webhookSecretKey: string;
  database?: TestDatabase;
  /** JetStream stream for the facility service's outbox relay; without it the relay is off. */
  eventsStream?: string;
  facilityEnv?: Record<string, string>;
  webhookEnv?: Record<string, string>;
  usageEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** false: every process runs without `--enable-source-maps`, as the chart runs them (startService). */
  sourceMaps?: boolean;
}

export interface ApiStack extends Stack {
  facility: ServiceProcess;
  webhook: ServiceProcess;
  facilityUrl: string;
  webhookUrl: string;
  /** The (first) gateway's base URL. */
  gateway: string;
  /** POST /internal/v1/ingest on the facility service (token-protected, not routed by the gateway). */
  ingest(body: object): Promise<{ status: number; text: string }>;
  /** Stops the gateway, usage, webhook and facility processes (and drops the database it created). */
  stop(): Promise<void>;
}

/**
 * The whole public API on one database: facility and webhook services, a usage
 * service and a gateway routing to them, started together on ports chosen here.
 * The dispatcher is the caller's (its receivers and certificates differ per test).
 */
export async function startApiStack(options: ApiStackOptions): Promise<ApiStack> {
  const db = options.database ?? (await createTestDatabase(options.label));
  const [facilityPort, webhookPort] = [await freePort(), await freePort()];
  const facilityUrl = `http://127.0.0.1:${facilityPort}`;
  const webhookUrl = `http://127.0.0.1:${webhookPort}`;
  const common = { DATABASE_URL: db.url, ...db.env, METRICS_PORT: '0', HOST: '127.0.0.1', INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET };
  const events: Record<string, string> = options.eventsStream
    ? { EVENTS_STREAM: options.eventsStream, EVENTS_SUBJECT_PREFIX: options.eventsStream.toLowerCase(), OUTBOX_POLL_MS: '50' }
    : { RELAY_ENABLED: 'false' };
  const started = await Promise.allSettled([
    startService(
      'facility',
      {
        ...common,
        ...events,
        PORT: String(facilityPort),
        NATS_URL: testUrls.nats,
        INGEST_TOKEN: TEST_INGEST_TOKEN,
        ...options.facilityEnv,
      },
      { sourceMaps: options.sourceMaps },
    ),
    startService(
      'webhook',
      {
        ...common,
        PORT: String(webhookPort),
        WEBHOOK_SECRET_KEY: options.webhookSecretKey,
        FACILITY_URL: facilityUrl,
        ...options.webhookEnv,
      },
      { sourceMaps: options.sourceMaps },
    ),
    startStack({
      label: options.label,
      database: db,
      facilityUrl,
      webhookUrl,
      usageEnv: options.usageEnv,
      gatewayEnv: options.gatewayEnv,
      sourceMaps: options.sourceMaps,
    }),
  ]);
  const [facility, webhook, stack] = started;
  if (facility.status === 'rejected' || webhook.status === 'rejected' || stack.status === 'rejected') {
    // One did not come up: stop what did, so no process outlives the failed test file.
    await Promise.allSettled([
      facility.status === 'fulfilled' ? facility.value.stop('SIGKILL') : undefined,
      webhook.status === 'fulfilled' ? webhook.value.stop('SIGKILL') : undefined,
      stack.status === 'fulfilled' ? stack.value.stop() : undefined,
    ]);
    if (!options.database) await db.drop().catch(() => undefined);
    throw (started.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason;
  }
  const base = stack.value;
  // Inherits from the usage + gateway stack rather than copying it: its `usage` getter follows restarts.
  return Object.assign(Object.create(base) as Stack, {
    facility: facility.value,
    webhook: webhook.value,
    facilityUrl,
    webhookUrl,
    gateway: base.gatewayUrls[0] as string,
    async ingest(body: object) {
      const res = await fetch(`${facilityUrl}/internal/v1/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, text: await res.text() };
    },
    async stop() {
      const stopped = await Promise.allSettled([base.stop(), webhook.value.stop(), facility.value.stop()]);
      if (!options.database) await db.drop();
      const failed = stopped.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
  });
}
