import {
  createLogger,
  createMetrics,
  createPool,
  drainConnections,
  InternalAuth,
  installProcessGuard,
  installShutdown,
  loadConfigOrExit,
  migrate,
  postgresOptions,
  startMetricsServer,
} from '@fcd/service-kit';
import { SecretBox, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { buildApp } from './app';
import { HttpFacilityDirectory } from './clients/facility';
import { ConfigSchema } from './config';

const config = loadConfigOrExit('webhook', ConfigSchema);
const logger = createLogger({ service: 'webhook', level: config.LOG_LEVEL });
installProcessGuard(logger);
if (config.WEBHOOK_ALLOW_PRIVATE_URLS) {
  logger.warn('WEBHOOK_ALLOW_PRIVATE_URLS is on: http and private/loopback webhook destinations are accepted (development only)');
}

const secretBox = SecretBox.fromEnv(config.WEBHOOK_SECRET_KEY, config.WEBHOOK_SECRET_KEY_PREVIOUS);
const internalAuth = new InternalAuth(config.INTERNAL_AUTH_SECRET);
const metrics = createMetrics('webhook');
const pool = createPool({
  connectionString: config.DATABASE_URL,
  applicationName: 'webhook',
  logger,
  timeouts: config,
  registry: metrics.registry,
  connection: postgresOptions(config),
});
const facilities = new HttpFacilityDirectory({ baseUrl: config.FACILITY_URL, internalAuth });

try {
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations, logger);
} catch (err) {
  logger.fatal({ err: { message: (err as Error).message } }, 'webhook service failed to start: migrations');
  process.exit(1);
}

let shuttingDown = false;
const app = await buildApp({
  config,
  logger,
  pool,
  internalAuth,
  secretBox,
  facilities,
  metrics,
  isShuttingDown: () => shuttingDown,
  http: config,
});

await app.listen({ port: config.PORT, host: config.HOST });
const metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);
const address = app.server.address();
const metricsAddress = metricsServer.address();
const port = typeof address === 'object' && address ? address.port : config.PORT;
const metricsPort = typeof metricsAddress === 'object' && metricsAddress ? metricsAddress.port : config.METRICS_PORT;
logger.info({ port, metricsPort, secretKeyId: secretBox.keyId }, 'ready');

installShutdown(logger, [
  { name: 'not ready', run: () => (shuttingDown = true) },
  { name: 'drain keep-alive connections', run: () => drainConnections(app.server, config.HTTP_DRAIN_MS) },
  { name: 'stop accepting and drain', run: () => app.close() },
  { name: 'close facility pool', run: () => facilities.close() },
  { name: 'close postgres pool', run: () => pool.end() },
  { name: 'close metrics server', run: () => new Promise<void>((resolve) => metricsServer.close(() => resolve())) },
]);
