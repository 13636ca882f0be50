import {
  createLogger,
  createPool,
  drainConnections,
  InternalAuth,
  installProcessGuard,
  installShutdown,
  instrumentPool,
  loadConfigOrExit,
  migrate,
  natsOptions,
  postgresOptions,
  startMetricsServer,
  systemClock,
  uuidSource,
} from '@fcd/service-kit';
import { buildApp } from './app';
import { FacilityConfigSchema } from './config';
import { Ingestion } from './ingestion';
import { createFacilityMetrics } from './metrics';
import { OutboxRelay } from './relay';
import { guardedDb, SCHEMA, schemaPoolTarget } from './store/db';
import { EventBus } from './store/event-bus';
import { migrations } from './store/migrations';
import { echoSyncStats, outboxStats } from './store/outbox';

// config → build → listen → signals
const config = loadConfigOrExit('facility', FacilityConfigSchema);
const logger = createLogger({ service: 'facility', level: config.LOG_LEVEL });
installProcessGuard(logger);
const clock = systemClock;
const connection = postgresOptions(config);
const pool = createPool({
  ...schemaPoolTarget(config.DATABASE_URL, connection.poolMode),
  max: config.PG_POOL_MAX,
  applicationName: 'facility',
  logger,
  timeouts: config,
  connection,
});

try {
  await migrate(pool, SCHEMA, migrations, logger);
} catch (err) {
  logger.fatal({ err: { message: (err as Error).message } }, 'migration failed');
  await pool.end().catch(() => undefined);
  process.exit(1);
}

const metrics = createFacilityMetrics(
  () => outboxStats(pool, new Date(clock.now()).toISOString()),
  () => echoSyncStats(pool),
);
instrumentPool(pool, metrics.registry);
const bus = new EventBus({
  url: config.NATS_URL,
  auth: natsOptions(config, config.NATS_URL),
  stream: config.EVENTS_STREAM,
  subjectPrefix: config.EVENTS_SUBJECT_PREFIX,
  replicas: config.NATS_STREAM_REPLICAS,
  logger,
});
bus.start();

const relay = new OutboxRelay({
  pool,
  bus,
  clock,
  logger,
  batchSize: config.OUTBOX_BATCH_SIZE,
  pollMs: config.OUTBOX_POLL_MS,
  retentionHours: config.OUTBOX_RETENTION_HOURS,
  eventsPublished: metrics.eventsPublished,
});
const ingestion = new Ingestion({
  pool,
  clock,
  ids: uuidSource,
  rowsCounter: metrics.ingestRows,
  onEventsCommitted: () => relay.nudge(),
});

let shuttingDown = false;
const app = await buildApp({
  logger,
  metrics,
  db: guardedDb(pool),
  ingestion,
  auth: new InternalAuth(config.INTERNAL_AUTH_SECRET),
  ingestToken: config.INGEST_TOKEN,
  ingestMaxBodyBytes: config.INGEST_MAX_BODY_BYTES,
  readiness: { postgres: () => pool.query('SELECT 1'), nats: () => bus.check() },
  shuttingDown: () => shuttingDown,
  http: config,
});

await app.listen({ port: config.PORT, host: config.HOST });
const metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);
if (config.RELAY_ENABLED) relay.start();

const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : config.PORT;
const metricsAddress = metricsServer.address();
const metricsPort = typeof metricsAddress === 'object' && metricsAddress ? metricsAddress.port : config.METRICS_PORT;
logger.info({ port, metricsPort, relay: config.RELAY_ENABLED }, 'ready');

installShutdown(logger, [
  { name: 'not ready', run: () => (shuttingDown = true) },
  { name: 'drain keep-alive connections', run: () => drainConnections(app.server, config.HTTP_DRAIN_MS) },
  { name: 'stop accepting and drain requests', run: () => app.close() },
  { name: 'stop relay after its current batch', run: () => relay.stop() },
  { name: 'close metrics server', run: () => new Promise((r) => metricsServer.close(() => r(undefined))) },
  { name: 'close nats', run: () => bus.close() },
  { name: 'close postgres pool', run: () => pool.end() },
]);
