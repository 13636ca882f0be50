import {
  createLogger,
  createPool,
  installProcessGuard,
  installShutdown,
  loadConfigOrExit,
  migrate,
  postgresOptions,
  startMetricsServer,
} from '@fcd/service-kit';
import { SecretBox, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { buildApp } from './app';
import { ConfigSchema } from './config';
import { Dispatcher } from './dispatcher';
import { createDispatcherMetrics } from './metrics';
import { UsageAccountDirectory } from './usage-directory';

// config → build → listen → signals
const config = loadConfigOrExit('dispatcher', ConfigSchema);
const logger = createLogger({ service: 'dispatcher', level: config.LOG_LEVEL });
installProcessGuard(logger);
if (config.USAGE_GRPC_ADDRESS && !config.USAGE_GRPC_SECRET) {
  process.stderr.write('dispatcher: invalid configuration: USAGE_GRPC_SECRET: required when USAGE_GRPC_ADDRESS is set\n');
  process.exit(1);
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
  logger.fatal({ err: { message: (err as Error).message } }, 'migration failed');
  await pool.end().catch(() => undefined);
  process.exit(1);
}

const accounts = config.USAGE_GRPC_ADDRESS
  ? new UsageAccountDirectory(config.USAGE_GRPC_ADDRESS, config.USAGE_GRPC_SECRET ?? '')
  : undefined;
if (!accounts) logger.warn('USAGE_GRPC_ADDRESS is unset: accounts downgraded below Pro keep receiving webhooks');
const dispatcher = new Dispatcher({ config, pool, secretBox, logger, metrics, ...(accounts ? { accounts } : {}) });
let shuttingDown = false;
const app = await buildApp({
  logger,
  metrics,
  checks: { postgres: () => pool.query('SELECT 1'), nats: () => dispatcher.consumer.check() },
  isShuttingDown: () => shuttingDown,
  http: config,
});

await app.listen({ port: config.PORT, host: config.HOST });
const metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);
dispatcher.start();

const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : config.PORT;
const metricsAddress = metricsServer.address();
const metricsPort = typeof metricsAddress === 'object' && metricsAddress ? metricsAddress.port : config.METRICS_PORT;
logger.info({ port, metricsPort, consumer: config.DISPATCHER_CONSUMER, stream: config.EVENTS_STREAM }, 'ready');

installShutdown(logger, [
  { name: 'not ready', run: () => (shuttingDown = true) },
  { name: 'stop consuming, finish in-flight sends', run: () => dispatcher.stop() },
  { name: 'stop accepting', run: () => app.close() },
  { name: 'close metrics server', run: () => new Promise((r) => metricsServer.close(() => r(undefined))) },
  { name: 'close usage client', run: () => accounts?.close() },
  { name: 'close postgres pool', run: () => pool.end() },
]);
