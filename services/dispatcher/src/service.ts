import {
  type Clock,
  createLogger,
  createPool,
  errMessage,
  type Logger,
  migrate,
  postgresOptions,
  runShutdownSteps,
  type ShutdownStep,
  Supervisor,
  startMetricsServer,
  systemClock,
} from '@fcd/service-kit';
import { SecretBox, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { buildDispatcherApp } from './app';
import { UsageAccountDirectory } from './clients/usage-directory';
import type { DispatcherConfig } from './config';
import { Dispatcher } from './delivery/dispatcher';
import { createDispatcherMetrics } from './metrics';

export interface DispatcherService {
  port: number;
  metricsPort: number;
  /** Ordered shutdown: not ready → stop consuming and finish the sends in flight → close HTTP, usage client, Postgres. */
  stop(): Promise<void>;
}

/** A configuration the schema cannot express; the process exits 1 with this one line. */
export class DispatcherConfigError extends Error {}

/** The webhook schema could not be migrated (logged as "migration failed"); the process exits 1. */
export class MigrationError extends Error {}

/**
 * Wires the dispatcher from a parsed config: migrate the webhook schema → app and metrics →
 * listen → consume and deliver. main.ts and in-process tests both use it.
 */
export async function startDispatcher(
  config: DispatcherConfig,
  options: { clock?: Clock; logger?: Logger } = {},
): Promise<DispatcherService> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ service: 'dispatcher', level: config.LOG_LEVEL });
  if (config.USAGE_GRPC_ADDRESS && !config.USAGE_GRPC_SECRET) {
    throw new DispatcherConfigError('USAGE_GRPC_SECRET: required when USAGE_GRPC_ADDRESS is set');
  }
  if (config.WEBHOOK_ALLOW_PRIVATE_URLS) {
    logger.warn('WEBHOOK_ALLOW_PRIVATE_URLS is on: http and private/loopback destinations are contacted (development only)');
  }
  const secretBox = SecretBox.fromEnv(config.WEBHOOK_SECRET_KEY, config.WEBHOOK_SECRET_KEY_PREVIOUS);
  const metrics = createDispatcherMetrics();
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    max: config.PG_POOL_MAX,
    applicationName: 'dispatcher',
    logger,
    timeouts: config,
    registry: metrics.registry,
    connection: postgresOptions(config),
  });
  try {
    // The dispatcher shares the webhook schema; the same migrations under the same advisory lock.
    await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations, logger);
  } catch (err) {
    logger.fatal({ err: { message: errMessage(err) } }, 'migration failed');
    await pool.end().catch(() => undefined);
    throw new MigrationError(errMessage(err), { cause: err });
  }

  const accounts = config.USAGE_GRPC_ADDRESS
    ? new UsageAccountDirectory(config.USAGE_GRPC_ADDRESS, config.USAGE_GRPC_SECRET ?? '')
    : undefined;
  if (!accounts) logger.warn('USAGE_GRPC_ADDRESS is unset: accounts downgraded below Pro keep receiving webhooks');
  const dispatcher = new Dispatcher({ config, pool, secretBox, logger, metrics, clock, ...(accounts ? { accounts } : {}) });
  let shuttingDown = false;
  const app = await buildDispatcherApp({
    logger,
    metrics,
    checks: { postgres: () => pool.query('SELECT 1'), nats: () => dispatcher.consumer.check() },
    isShuttingDown: () => shuttingDown,
    http: config,
  });
  await app.listen({ port: config.PORT, host: config.HOST });
  const metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);
  // The background work: deliveries, the event consumer, the event log's pruning.
  const workers = new Supervisor(dispatcher.workers(), { logger });
  workers.start();

  const steps: ShutdownStep[] = [
    { name: 'not ready', run: () => (shuttingDown = true) },
    { name: 'stop pruning and consuming, finish in-flight sends', run: () => workers.stop() },
    { name: 'close the HTTP pool of the sends', run: () => dispatcher.close() },
    { name: 'stop accepting', run: () => app.close() },
    { name: 'close metrics server', run: () => new Promise((r) => metricsServer.close(() => r(undefined))) },
    { name: 'close usage client', run: () => accounts?.close() },
    { name: 'close postgres pool', run: () => pool.end() },
  ];
  return {
    port: (app.server.address() as { port: number }).port,
    metricsPort: (metricsServer.address() as { port: number }).port,
    // Each step runs even when an earlier one failed: what is left open is closed all the same.
    stop: () => runShutdownSteps(logger, steps),
  };
}
