import type { Server } from 'node:http';
import { createClient, type TypedClient } from '@fcd/grpc';
import { BillingService, PortalService, UsageService } from '@fcd/proto';
import {
  Counter,
  clusterFromSettings,
  createLogger,
  createMetrics,
  drainConnections,
  Histogram,
  InternalAuth,
  type Logger,
  type Registry,
  redisOptions,
  startMetricsServer,
} from '@fcd/service-kit';
import { type Cluster, Redis } from 'ioredis';
import { buildGatewayApp } from './app';
import { AuthorizationBatcher } from './auth/batcher';
import { Upstream } from './clients/proxy';
import { UsageHealth } from './clients/usage-health';
import type { GatewayConfig } from './config';
import { IdempotencyStore } from './http/idempotency';
import type { ExportLimits } from './routes/exports';
import { ExportSlots } from './store/export-slots';

export interface GatewayService {
  port: number;
  metricsPort: number;
  stop(): Promise<void>;
}

/** Bulk exports' limits (docs/api.md, "Bulk export"): slots per account in Redis, per replica, the send timeout. */
function exportLimits(config: GatewayConfig, redis: Redis | Cluster, logger: Logger): ExportLimits {
  return {
    slots: new ExportSlots(redis, config.REDIS_KEY_PREFIX, config.EXPORT_SLOT_TTL_MS, (err) =>
      logger.warn({ err: { message: (err as Error).message } }, 'export slot renewal or release failed'),
    ),
    concurrency: { pro: config.EXPORT_CONCURRENCY_PRO, enterprise: config.EXPORT_CONCURRENCY_ENTERPRISE },
    perReplica: config.EXPORT_MAX_PER_REPLICA,
    sendTimeoutMs: config.EXPORT_SEND_TIMEOUT_MS,
    graceMs: config.EXPORT_SEND_GRACE_MS,
  };
}

/** The authorization batcher on the usage client, with its two metrics. */
function createBatcher(
  config: GatewayConfig,
  usage: TypedClient<typeof UsageService>,
  logger: Logger,
  registry: Registry,
): AuthorizationBatcher {
  const batchSize = new Histogram({
    name: 'fcd_gateway_authorize_batch_size',
    help: 'Requests coalesced into one authorization batch.',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers: [registry],
  });
  const resentBatches = new Counter({
    name: 'fcd_gateway_authorize_resent_batches_total',
    help: 'Authorization batches sent again because a draining usage replica ended their stream without answering them (uncounted).',
    registers: [registry],
  });
  return new AuthorizationBatcher(usage, logger, {
    deadlineMs: config.AUTH_DEADLINE_MS,
    maxBatch: config.AUTH_MAX_BATCH,
    streams: config.AUTH_STREAMS,
    streamMaxAgeMs: config.AUTH_STREAM_MAX_AGE_MS,
    onBatch: (n) => batchSize.observe(n),
    onResend: (n) => resentBatches.inc(n),
  });
}

/** Idempotency records and export slots: the gateway never counts in Redis (the usage service does). */
function connectRedis(config: GatewayConfig, logger: Logger): Redis | Cluster {
  const redis =
    clusterFromSettings(config, (scheme) => redisOptions(config, scheme)) ??
    new Redis(config.REDIS_URL as string, {
      ...redisOptions(config, config.REDIS_URL as string),
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      commandTimeout: 2000,
      retryStrategy: (times) => Math.min(times * 100, 1000),
    });
  redis.on('error', (err) => logger.debug({ err: { message: err.message } }, 'idempotency redis error'));
  return redis;
}

export async function startGateway(config: GatewayConfig, options: { logger?: Logger } = {}): Promise<GatewayService> {
  const logger = options.logger ?? createLogger({ service: 'gateway', level: config.LOG_LEVEL });
  const metrics = createMetrics('gateway');
  const usage = createClient(UsageService, config.USAGE_GRPC_ADDRESS, {
    defaultDeadlineMs: config.AUTH_DEADLINE_MS,
    callSecret: config.USAGE_GRPC_SECRET,
    channelOptions: {
      'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ [config.USAGE_GRPC_LB_POLICY]: {} }] }),
      'grpc.dns_min_time_between_resolutions_ms': config.USAGE_GRPC_DNS_MIN_INTERVAL_MS,
    },
  });
  const billing = createClient(BillingService, config.USAGE_GRPC_ADDRESS, { callSecret: config.USAGE_GRPC_SECRET });
  const portal = createClient(PortalService, config.USAGE_GRPC_ADDRESS, {
    defaultDeadlineMs: config.AUTH_DEADLINE_MS,
    callSecret: config.USAGE_GRPC_SECRET,
  });
  const batcher = createBatcher(config, usage, logger, metrics.registry);
  const health = new UsageHealth(config.USAGE_GRPC_ADDRESS);
  const resentRequests = new Counter({
    name: 'fcd_gateway_upstream_resent_requests_total',
    help: 'Reads sent to a domain service once more because their connection was reset before the answer (a replica leaving).',
    labelNames: ['upstream'],
    registers: [metrics.registry],
  });
  const upstream = (name: 'facility' | 'webhook', url: string) =>
    new Upstream(name, url, config.UPSTREAM_TIMEOUT_MS, config.UPSTREAM_CONNECTIONS, () => resentRequests.inc({ upstream: name }));
  const upstreams = { facility: upstream('facility', config.FACILITY_URL), webhook: upstream('webhook', config.WEBHOOK_URL) };
  const redis = connectRedis(config, logger);
  const idempotency = new IdempotencyStore(redis, config.REDIS_KEY_PREFIX, config.INTERNAL_AUTH_SECRET, {
    ttlMs: config.IDEMPOTENCY_TTL_SECONDS * 1000,
    // The work of a POST ends within the upstream timeout; the lease outlives it a little.
    leaseMs: config.UPSTREAM_TIMEOUT_MS + 5000,
  });
  let shuttingDown = false;
  const app = buildGatewayApp({
    logger,
    metrics,
    batcher,
    usage,
    portal,
    billing,
    upstreams,
    internalAuth: new InternalAuth(config.INTERNAL_AUTH_SECRET),
    idempotency,
    idempotencyWaitMs: config.UPSTREAM_TIMEOUT_MS + 5000,
    readiness: {
      usage: () => health.check(''),
      postgres: () => health.check('postgres'),
      redis: () => health.check('redis'),
      facility: () => upstreams.facility.healthy(),
      webhook: () => upstreams.webhook.healthy(),
    },
    isShuttingDown: () => shuttingDown,
    http: config,
    exports: exportLimits(config, redis, logger),
  });
  await app.listen({ port: config.PORT, host: config.HOST });
  const port = (app.server.address() as { port: number }).port;
  const metricsServer: Server = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);
  const metricsPort = (metricsServer.address() as { port: number }).port;
  return {
    port,
    metricsPort,
    async stop() {
      shuttingDown = true; // readiness fails first, so the load balancer stops sending
      await drainConnections(app.server, config.HTTP_DRAIN_MS); // keep-alive clients get Connection: close
      await app.close(); // stop accepting, drain in-flight requests
      await batcher.close();
      await Promise.all([upstreams.facility.close(), upstreams.webhook.close()]);
      usage.close();
      portal.close();
      billing.close();
      redis.disconnect();
      health.close();
      await new Promise((r) => metricsServer.close(r));
    },
  };
}
