import {
  type Clock,
  createLogger,
  createMetrics,
  createPool,
  drainConnections,
  InternalAuth,
  type Logger,
  migrate,
  type Pool,
  postgresOptions,
  runShutdownSteps,
  type ShutdownStep,
  startMetricsServer,
  systemClock,
} from '@fcd/service-kit';
import { SecretBox, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { buildWebhookApp } from './app';
import { HttpFacilityDirectory } from './clients/facility';
import type { WebhookConfig } from './config';

export interface WebhookService {
  port: number;
  metricsPort: number;
  /** Id of the key that encrypts new signing secrets (logged in the ready line; never the key). */
  secretKeyId: string;
  /** Ordered shutdown: not ready → drain → close the facility client, Postgres and the metrics server. */
  stop(): Promise<void>;
}

/** The pool, migrated; closed again when the migration fails. */
async function openDatabase(config: WebhookConfig, logger: Logger, registry: ReturnType<typeof createMetrics>['registry']): Promise<Pool> {
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    applicationName: 'webhook',
    logger,
    timeouts: config,
    registry,
    connection: postgresOptions(config),
  });
  try {
    await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations, logger);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(`migrations: ${(err as Error).message}`);
  }
  return pool;
}

/**
 * Wires the webhook service from a parsed config: migrate → app → listen → metrics.
 * main.ts and in-process tests both use it.
 */
export async function startWebhook(config: WebhookConfig, options: { clock?: Clock; logger?: Logger } = {}): Promise<WebhookService> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ service: 'webhook', level: config.LOG_LEVEL });
  if (config.WEBHOOK_ALLOW_PRIVATE_URLS) {
    logger.warn('WEBHOOK_ALLOW_PRIVATE_URLS is on: http and private/loopback webhook destinations are accepted (development only)');
  }
  const secretBox = SecretBox.fromEnv(config.WEBHOOK_SECRET_KEY, config.WEBHOOK_SECRET_KEY_PREVIOUS);
  const internalAuth = new InternalAuth(config.INTERNAL_AUTH_SECRET);
  const metrics = createMetrics('webhook');
  const pool = await openDatabase(config, logger, metrics.registry);
  const facilities = new HttpFacilityDirectory({ baseUrl: config.FACILITY_URL, internalAuth });

  let shuttingDown = false;
  const app = await buildWebhookApp({
    config,
    logger,
    pool,
    internalAuth,
    secretBox,
    facilities,
    metrics,
    clock,
    isShuttingDown: () => shuttingDown,
    http: config,
  });
  await app.listen({ port: config.PORT, host: config.HOST });
  const metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);

  const steps: ShutdownStep[] = [
    { name: 'not ready', run: () => (shuttingDown = true) },
    { name: 'drain keep-alive connections', run: () => drainConnections(app.server, config.HTTP_DRAIN_MS) },
    { name: 'stop accepting and drain', run: () => app.close() },
    { name: 'close facility pool', run: () => facilities.close() },
    { name: 'close postgres pool', run: () => pool.end() },
    { name: 'close metrics server', run: () => new Promise<void>((resolve) => metricsServer.close(() => resolve())) },
  ];
  return {
    port: (app.server.address() as { port: number }).port,
    metricsPort: (metricsServer.address() as { port: number }).port,
    secretKeyId: secretBox.keyId,
    // Each step runs even when an earlier one failed: what is left open is closed all the same.
    stop: () => runShutdownSteps(logger, steps),
  };
}
