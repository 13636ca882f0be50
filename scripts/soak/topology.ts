import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import {
  FaultProxy,
  freePort,
  PrivateNatsCluster,
  PrivatePostgres,
  PrivateRedis,
  PrivateRedisCluster,
  TcpBalancer,
  TEST_INGEST_TOKEN,
  TEST_INTERNAL_AUTH_SECRET,
  TEST_USAGE_GRPC_SECRET,
} from '@fcd/testing';
import type { HistoryWriter } from './history';
import { Replica } from './replica';

/**
 * The soak's system, as the chart runs it, on this machine: 2 replicas of each service behind a
 * balancer each (a Kubernetes Service); a private Postgres, reached through a fault proxy; Redis,
 * one server behind a fault proxy or a 3-primary cluster; a 3-node JetStream with EVENTS at R3.
 * The gateways reach usage through a fault proxy too (the `link:usage` faults).
 */
export const DATABASE = 'soak';
export const STREAM = 'SOAK_EVENTS';
export const REPLICAS = { gateway: 2, usage: 2, facility: 2, webhook: 2, dispatcher: 2 } as const;
/** The dispatcher's retry schedule in the soak: short, so deliveries end within the run. */
export const RETRY_SCHEDULE_MS = [1_000, 2_000, 4_000, 8_000, 16_000];
export const RETRY_JITTER = 0.2;
export const WEBHOOK_TIMEOUT_MS = 5_000;
/** The dispatcher's default WEBHOOK_CONNECT_TIMEOUT_MS (part of the claim's lease, so of the in-flight bound). */
export const WEBHOOK_CONNECT_TIMEOUT_MS = 5_000;

export interface TopologyOptions {
  redis: 'single' | 'cluster';
  history: HistoryWriter;
  /** The receivers' CA (NODE_EXTRA_CA_CERTS of the dispatchers). */
  caFile: string;
  /** A directory for each replica's log (`<name>.log`); none: logs are kept in memory only. */
  logDir?: string;
}

/** The private backends, and the fault proxies in front of them. */
interface Backends {
  pg: PrivatePostgres;
  pgProxy: FaultProxy;
  redis?: PrivateRedis;
  redisProxy?: FaultProxy;
  redisCluster?: PrivateRedisCluster;
  nats: PrivateNatsCluster;
}

export interface Topology extends Backends {
  usageProxy: FaultProxy;
  /** The ingress: clients' URL of the gateways. */
  gatewayUrl: string;
  facilityUrl: string;
  replicas: Replica[];
  webhookSecretKey: string;
  /** The database as the harness reads it (no proxy). */
  directUrl: string;
  stop(): Promise<void>;
}

async function startBackends(redis: 'single' | 'cluster'): Promise<Backends> {
  const pg = await PrivatePostgres.start();
  await pg.createDatabase(DATABASE);
  const pgProxy = await FaultProxy.start({ port: pg.port });
  const nats = await PrivateNatsCluster.start({ size: 3 });
  if (redis === 'cluster') return { pg, pgProxy, nats, redisCluster: await PrivateRedisCluster.start() };
  const r = await PrivateRedis.start();
  return { pg, pgProxy, nats, redis: r, redisProxy: await FaultProxy.start({ port: r.port }) };
}

/** Each service's env on these backends (ports are the replica's own). */
function serviceEnvs(b: Backends, ports: { usageGrpc: number; facility: number; webhook: number }, caFile: string, key: string) {
  const db = `postgres://postgres@127.0.0.1:${b.pgProxy.port}/${DATABASE}`;
  const redis: Record<string, string> = b.redisCluster
    ? { REDIS_CLUSTER_NODES: b.redisCluster.addresses.join(',') }
    : { REDIS_URL: `redis://127.0.0.1:${b.redisProxy?.port}` };
  const common = { METRICS_PORT: '0', HOST: '127.0.0.1', INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET };
  const nats = { NATS_URL: b.nats.url, NATS_STREAM_REPLICAS: '3', EVENTS_STREAM: STREAM, EVENTS_SUBJECT_PREFIX: STREAM.toLowerCase() };
  const usageAddress = `127.0.0.1:${ports.usageGrpc}`;
  return {
    usage: { ...common, DATABASE_URL: db, ...redis, REDIS_KEY_PREFIX: 'soak:', USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET },
    gateway: {
      ...common,
      ...redis,
      REDIS_KEY_PREFIX: 'soak-gw:',
      USAGE_GRPC_ADDRESS: usageAddress,
      USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
      FACILITY_URL: `http://127.0.0.1:${ports.facility}`,
      WEBHOOK_URL: `http://127.0.0.1:${ports.webhook}`,
    },
    facility: { ...common, ...nats, DATABASE_URL: db, INGEST_TOKEN: TEST_INGEST_TOKEN },
    webhook: {
      ...common,
      DATABASE_URL: db,
      WEBHOOK_SECRET_KEY: key,
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      FACILITY_URL: `http://127.0.0.1:${ports.facility}`,
    },
    dispatcher: {
      ...common,
      ...nats,
      DATABASE_URL: db,
      DISPATCHER_CONSUMER: 'soak_dispatcher',
      WEBHOOK_SECRET_KEY: key,
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_RETRY_SCHEDULE: RETRY_SCHEDULE_MS.map((ms) => `${ms}ms`).join(','),
      WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
      USAGE_GRPC_ADDRESS: usageAddress,
      USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
      NODE_EXTRA_CA_CERTS: caFile,
    },
  } satisfies Record<keyof typeof REPLICAS, Record<string, string>>;
}

/** Replicas of one service on fixed ports, behind a balancer that follows their readiness. */
async function serviceReplicas(
  service: keyof typeof REPLICAS,
  env: Record<string, string>,
  portVar: 'PORT' | 'GRPC_PORT',
  history: HistoryWriter,
  logDir?: string,
): Promise<{ replicas: Replica[]; balancer: TcpBalancer }> {
  const balancer = await TcpBalancer.start([]);
  const replicas: Replica[] = [];
  for (let i = 1; i <= REPLICAS[service]; i++) {
    const port = await freePort();
    const own: Record<string, string> = portVar === 'PORT' ? { PORT: String(port) } : { PORT: '0', GRPC_PORT: String(port) };
    const name = `${service}-${i}`;
    const replica = new Replica(
      name,
      service,
      { ...env, ...own },
      history,
      (ready) => (ready ? balancer.add(port) : balancer.remove(port)),
      logDir ? join(logDir, `${name}.log`) : undefined,
    );
    // One at a time: the first replica runs the migrations.
    await replica.start();
    replicas.push(replica);
  }
  return { replicas, balancer };
}

export async function startTopology(options: TopologyOptions): Promise<Topology> {
  const b = await startBackends(options.redis);
  const key = randomBytes(32).toString('base64');
  const balancers: TcpBalancer[] = [];
  const replicas: Replica[] = [];
  const ports = { usageGrpc: 0, facility: 0, webhook: 0 };
  const add = async (service: keyof typeof REPLICAS, portVar: 'PORT' | 'GRPC_PORT' = 'PORT') => {
    const env = serviceEnvs(b, ports, options.caFile, key)[service];
    const started = await serviceReplicas(service, env, portVar, options.history, options.logDir);
    balancers.push(started.balancer);
    replicas.push(...started.replicas);
    return started.balancer;
  };
  const usage = await add('usage', 'GRPC_PORT');
  const usageProxy = await FaultProxy.start({ port: usage.port });
  ports.usageGrpc = usageProxy.port;
  ports.facility = (await add('facility')).port;
  ports.webhook = (await add('webhook')).port;
  const gateway = await add('gateway');
  await add('dispatcher');
  return {
    ...b,
    usageProxy,
    gatewayUrl: gateway.url,
    facilityUrl: `http://127.0.0.1:${ports.facility}`,
    replicas,
    webhookSecretKey: key,
    directUrl: b.pg.url(DATABASE),
    async stop() {
      await Promise.allSettled(replicas.map((r) => r.stop()));
      await Promise.allSettled([...balancers.map((x) => x.close()), usageProxy.close(), b.pgProxy.close(), b.redisProxy?.close()]);
      await Promise.allSettled([b.nats.stop(), b.redis?.stop(), b.redisCluster?.stop(), b.pg.destroy()]);
    },
  };
}
