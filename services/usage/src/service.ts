import type { Server } from 'node:http';
import { grpc } from '@fcd/grpc';
import {
  type Clock,
  clusterFromSettings,
  createLogger,
  createPool,
  instrumentPool,
  type Logger,
  migrate,
  onStopWorker,
  type Pool,
  periodicWorker,
  postgresOptions,
  redisOptions,
  Supervisor,
  startMetricsServer,
  systemClock,
  type Worker,
  waitAtMost,
} from '@fcd/service-kit';
import type { HealthImplementation } from 'grpc-health-check';
import { addBillingGrpc, billingHttpDeps } from './billing/wiring';
import type { UsageConfig } from './config';
import { KeyCache } from './domain/key-cache';
import { createGrpcServer, HEALTH_SERVICE_NAME } from './grpc/server';
import { buildUsageHttpApp } from './http/app';
import { UsageMeter } from './meter/index';
import { KeyInvalidation } from './meter/key-invalidation';
import { createUsageMetrics, type UsageMetrics } from './metrics';
import { PortalStore } from './portal/store';
import { AccountStore } from './store/accounts';
import { CounterStore, createRedis, type RedisClient } from './store/counters';
import { migrations, USAGE_SCHEMA } from './store/migrations';

export interface UsageService {
  grpcPort: number;
  httpPort: number;
  metricsPort: number;
  meter: UsageMeter;
  accounts: AccountStore;
  logger: Logger;
  /** Ordered shutdown: not ready → stop accepting → drain → flush → close pools. */
  stop(): Promise<void>;
}

/** One Redis (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES), with the backends' credentials and TLS. */
function connectRedis(config: UsageConfig): RedisClient {
  const cluster = clusterFromSettings(config, (scheme) => redisOptions(config, scheme));
  if (cluster) return cluster;
  const url = config.REDIS_URL as string;
  return createRedis(url, redisOptions(config, url));
}

function firstConnection(redis: RedisClient, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    redis.once('ready', done);
  });
}

/** Wires the usage service from a parsed config; main.ts and in-process tests both use it. */
export async function startUsage(config: UsageConfig, options: { clock?: Clock; logger?: Logger } = {}): Promise<UsageService> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ service: 'usage', level: config.LOG_LEVEL });
  const metrics = createUsageMetrics();
  const { pool, redis, accounts, counters } = await openStores(config, clock, logger);
  const portal = new PortalStore(pool);
  const { cache, meter } = createMeter(config, { accounts, counters, sessions: portal }, clock, logger, metrics);
  // Key revocations and rolls reach every replica's key cache at once (Redis pub/sub).
  const keyInvalidation = new KeyInvalidation({ redis, cache, logger }, config.REDIS_KEY_PREFIX);
  meter.useKeyInvalidation(keyInvalidation);

  const checks = {
    postgres: async () => pool.query('SELECT 1'),
    redis: async () => counters.ping(),
  };
  let shuttingDown = false;

  const { grpcServer, health, drain, grpcPort } = await startGrpc(config, meter, accounts, logger, metrics, pool);
  const refreshHealth = () => reportHealth(health, checks, config.USAGE_FAIL_OPEN, shuttingDown);
  // The first health report (and so `ready`) waits for Redis's first connection, bounded by its
  // connect timeout: an unreachable Redis must not block start-up (it is reported NOT_SERVING).
  await firstConnection(redis, 2500);
  await refreshHealth();

  const http = buildUsageHttpApp({
    logger,
    metrics,
    accounts,
    portalLinks: { portal, now: () => clock.now(), publicBaseUrl: config.PUBLIC_BASE_URL },
    cache,
    keysChanged: (accountId) => keyInvalidation.publish(accountId),
    checks,
    // Ready through a documented degradation: Postgres down (known keys still metered), or Redis
    // down under fail-open (counted in Postgres).
    optionalChecks: config.USAGE_FAIL_OPEN ? ['redis'] : ['postgres'],
    adminToken: config.ADMIN_TOKEN,
    billing: billingHttpDeps({ pool, accounts, counters, flush: () => meter.flush(), clock, metrics, logger }),
    isShuttingDown: () => shuttingDown,
    http: config,
  });
  await http.listen({ port: config.PORT, host: config.HOST });
  const httpPort = (http.server.address() as { port: number }).port;
  instrumentPool(pool, metrics.registry);
  const metricsServer: Server = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);
  const metricsPort = (metricsServer.address() as { port: number }).port;

  const { flush, reconciliation } = writeBehind(config, meter, redis, logger, metrics);
  // Stopped in reverse order: health reports (NOT_SERVING), reconciliation, the gRPC drain, HTTP, the periodic flush.
  const workers = new Supervisor(
    [
      flush,
      onStopWorker('http server', () => http.close()),
      grpcStopWorker(grpcServer, drain, logger),
      reconciliation,
      keyInvalidation.worker(),
      healthReports(refreshHealth),
    ],
    { logger },
  );
  workers.start();

  return {
    grpcPort,
    httpPort,
    metricsPort,
    meter,
    accounts,
    logger,
    async stop() {
      shuttingDown = true;
      await workers.stop();
      await meter.flush().catch((err: Error) => logger.error({ err: { message: err.message } }, 'final usage flush failed'));
      await new Promise((r) => metricsServer.close(r));
      // Calls given up on are withdrawn before Redis is let go (bounded).
      await waitAtMost(Promise.all(counters.withdrawals), 5000);
      redis.disconnect();
      await pool.end();
    },
  };
}

/** The key cache and the meter on the stores. */
function createMeter(
  config: UsageConfig,
  stores: { accounts: AccountStore; counters: CounterStore; sessions: PortalStore },
  clock: Clock,
  logger: Logger,
  metrics: UsageMetrics,
): { cache: KeyCache; meter: UsageMeter } {
  const cache = new KeyCache(clock, config.KEY_CACHE_TTL_MS, config.KEY_CACHE_NEGATIVE_TTL_MS, 100_000, config.KEY_CACHE_OUTAGE_TTL_MS);
  const meter = new UsageMeter({
    ...stores,
    cache,
    clock,
    logger,
    metrics,
    failOpen: config.USAGE_FAIL_OPEN,
    reportCacheTtlMs: config.USAGE_REPORT_CACHE_TTL_MS,
  });
  if (config.USAGE_FAIL_OPEN) logger.warn('fail-open is enabled: with Redis down, requests are counted in Postgres');
  return { cache, meter };
}

/** The Postgres pool (migrated when MIGRATE_ON_START), Redis, and the stores on them. */
async function openStores(config: UsageConfig, clock: Clock, logger: Logger) {
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    applicationName: 'usage',
    logger,
    max: 10,
    timeouts: config,
    connection: postgresOptions(config),
  });
  if (config.MIGRATE_ON_START) await migrate(pool, USAGE_SCHEMA, migrations, logger);

  const redis = connectRedis(config);
  let lastRedisError = 0;
  redis.on('error', (err: Error) => {
    if (clock.now() - lastRedisError > 5000) logger.warn({ err: { message: err.message } }, 'redis connection error');
    lastRedisError = clock.now();
  });
  const accounts = new AccountStore(pool);
  const counters = new CounterStore(redis, config.REDIS_KEY_PREFIX, {
    waitReplicas: config.REDIS_WAIT_REPLICAS,
    onWithdraw: (r) => {
      if ('back' in r) logger.info({ countsTakenBack: r.back }, 'withdrew a Redis Cluster call answered 503');
      else logger.error({ err: { message: r.error.message } }, 'could not withdraw a Redis Cluster call answered 503');
    },
  });
  return { pool, redis, accounts, counters };
}

/** The gRPC server, bound to GRPC_PORT. */
async function startGrpc(
  config: UsageConfig,
  meter: UsageMeter,
  accounts: AccountStore,
  logger: Logger,
  metrics: UsageMetrics,
  pool: Pool,
) {
  const {
    server: grpcServer,
    health,
    drain,
  } = createGrpcServer(meter, accounts, logger, metrics, {
    callSecret: config.USAGE_GRPC_SECRET,
    maxBatchItems: config.GRPC_MAX_BATCH_ITEMS,
    maxMessageBytes: config.GRPC_MAX_MESSAGE_BYTES,
    maxConcurrentStreams: config.GRPC_MAX_CONCURRENT_STREAMS,
    maxConnectionAgeMs: config.GRPC_MAX_CONNECTION_AGE_MS,
    maxConnectionAgeGraceMs: config.GRPC_MAX_CONNECTION_AGE_GRACE_MS,
  });
  addBillingGrpc(grpcServer, pool, metrics);
  const grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync(`${config.HOST}:${config.GRPC_PORT}`, grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(err) : resolve(port),
    ),
  );
  return { grpcServer, health, drain, grpcPort };
}

/** Sets the gRPC health statuses from the checks. */
async function reportHealth(
  health: HealthImplementation,
  checks: { postgres: () => Promise<unknown>; redis: () => Promise<unknown> },
  failOpen: boolean,
  shuttingDown: boolean,
): Promise<void> {
  const [pg, rd] = await Promise.allSettled([checks.postgres(), checks.redis()]);
  health.setStatus('postgres', pg.status === 'fulfilled' ? 'SERVING' : 'NOT_SERVING');
  health.setStatus('redis', rd.status === 'fulfilled' ? 'SERVING' : 'NOT_SERVING');
  // Postgres down is a degradation, not an outage: known keys are still authorized and counted
  // (docs/metering.md), so the replica stays in the Service; the `postgres` status names it.
  const serving = !shuttingDown && (failOpen ? pg.status === 'fulfilled' || rd.status === 'fulfilled' : rd.status === 'fulfilled');
  health.setStatus('', serving ? 'SERVING' : 'NOT_SERVING');
  health.setStatus(HEALTH_SERVICE_NAME, serving ? 'SERVING' : 'NOT_SERVING');
}

/** The gRPC health statuses, refreshed every second; once more when stopped (NOT_SERVING: shutting down). */
function healthReports(refresh: () => Promise<void>): Worker {
  const every = periodicWorker('health reports', 1000, refresh, { immediately: false });
  return {
    name: every.name,
    async run(signal) {
      await every.run(signal);
      await refresh();
    },
  };
}

/**
 * The periodic flush of counts to Postgres, and the reconciliation of Redis counters into it
 * (whenever Redis (re)connects, and periodically). The final flush follows the drain in stop().
 */
function writeBehind(
  config: UsageConfig,
  meter: UsageMeter,
  redis: RedisClient,
  logger: Logger,
  metrics: UsageMetrics,
): { flush: Worker; reconciliation: Worker } {
  const flush = periodicWorker(
    'usage flush',
    config.USAGE_FLUSH_INTERVAL_MS,
    () => {
      metrics.pendingCounters.set(meter.pendingCount());
      return meter.flush().catch((err: Error) => logger.warn({ err: { message: err.message } }, 'usage flush failed; will retry'));
    },
    { immediately: false },
  );
  const reconcile = () =>
    meter
      .reconcile()
      .then((n) => logger.debug({ counters: n }, 'usage counters reconciled'))
      .catch((err: Error) => logger.warn({ err: { message: err.message } }, 'usage reconcile failed; will retry'));
  const periodically = periodicWorker('usage reconcile', config.USAGE_RECONCILE_INTERVAL_MS, reconcile, { immediately: false });
  const reconciliation: Worker = {
    name: periodically.name,
    async run(signal) {
      const onReady = () => void reconcile();
      redis.on('ready', onReady);
      if (redis.status === 'ready') void reconcile();
      try {
        await periodically.run(signal);
      } finally {
        redis.off('ready', onReady);
      }
    },
  };
  return { flush, reconciliation };
}

/**
 * Stop accepting and send GOAWAY (the gateways open their next streams on new connections, to
 * another replica), then end each authorization stream once its batches are answered; unary calls
 * finish. The server is forced closed after 5 s; batches still being decided (a slow Postgres,
 * fail-open) get up to 10 s more, so their counts are written before the final flush.
 */
function grpcStopWorker(grpcServer: grpc.Server, drain: () => Promise<void>, logger: Logger): Worker {
  return onStopWorker('grpc server', async () => {
    const { drained } = await shutDownGrpc(grpcServer, drain, logger);
    await waitAtMost(drained, 10_000);
  });
}

/**
 * Stops accepting and sends GOAWAY, then starts draining the authorization streams; resolves
 * once the server has shut down (forced after 5 s), with the drain (`drained`) still under way.
 */
async function shutDownGrpc(grpcServer: grpc.Server, drain: () => Promise<void>, logger: Logger): Promise<{ drained: Promise<void> }> {
  let drained: Promise<void> = Promise.resolve();
  await new Promise<void>((resolve) => {
    const force = setTimeout(() => {
      logger.warn('gRPC calls still open 5 s after shutdown began; forcing them closed');
      grpcServer.forceShutdown();
      resolve();
    }, 5000);
    grpcServer.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
    drained = drain();
  });
  return { drained };
}
