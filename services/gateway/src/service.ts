import type { Server } from 'node:http';
import { createClient } from '@fcd/grpc';
import { UsageService } from '@fcd/proto';
import { Counter, createLogger, createMetrics, Histogram, InternalAuth, type Logger, startMetricsServer } from '@fcd/service-kit';
import { buildGatewayApp } from './app';
import { AuthorizationBatcher } from './auth/batcher';
import type { GatewayConfig } from './config';
import { Upstream } from './upstream/proxy';
import { UsageHealth } from './upstream/usage-health';

export interface GatewayService {
  port: number;
  metricsPort: number;
  stop(): Promise<void>;
}

export async function startGateway(config: GatewayConfig, options: { logger?: Logger } = {}): Promise<GatewayService> {
  const logger = options.logger ?? createLogger({ service: 'gateway', level: config.LOG_LEVEL });
  const metrics = createMetrics('gateway');
  const batchSize = new Histogram({
    name: 'fcd_gateway_authorize_batch_size',
    help: 'Requests coalesced into one authorization batch.',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers: [metrics.registry],
  });
  const resentBatches = new Counter({
    name: 'fcd_gateway_authorize_resent_batches_total',
    help: 'Authorization batches sent again because a draining usage replica ended their stream without answering them (uncounted).',
    registers: [metrics.registry],
  });
  const usage = createClient(UsageService, config.USAGE_GRPC_ADDRESS, {
    defaultDeadlineMs: config.AUTH_DEADLINE_MS,
    callSecret: config.USAGE_GRPC_SECRET,
  });
  const batcher = new AuthorizationBatcher(usage, logger, {
    deadlineMs: config.AUTH_DEADLINE_MS,
    maxBatch: config.AUTH_MAX_BATCH,
    onBatch: (n) => batchSize.observe(n),
    onResend: (n) => resentBatches.inc(n),
  });
  const health = new UsageHealth(config.USAGE_GRPC_ADDRESS);
  const upstreams = {
    facility: new Upstream('facility', config.FACILITY_URL, config.UPSTREAM_TIMEOUT_MS, config.UPSTREAM_CONNECTIONS),
    webhook: new Upstream('webhook', config.WEBHOOK_URL, config.UPSTREAM_TIMEOUT_MS, config.UPSTREAM_CONNECTIONS),
  };
  let shuttingDown = false;
  const app = buildGatewayApp({
    logger,
    metrics,
    batcher,
    usage,
    upstreams,
    internalAuth: new InternalAuth(config.INTERNAL_AUTH_SECRET),
    readiness: {
      usage: () => health.check(''),
      postgres: () => health.check('postgres'),
      redis: () => health.check('redis'),
      facility: () => upstreams.facility.healthy(),
      webhook: () => upstreams.webhook.healthy(),
    },
    isShuttingDown: () => shuttingDown,
    http: config,
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
      await app.close(); // stop accepting, drain in-flight requests
      await batcher.close();
      await Promise.all([upstreams.facility.close(), upstreams.webhook.close()]);
      usage.close();
      health.close();
      await new Promise((r) => metricsServer.close(r));
    },
  };
}
