import {
  type Clock,
  createLogger,
  createPool,
  drainConnections,
  InternalAuth,
  instrumentPool,
  type Logger,
  migrate,
  natsOptions,
  type Pool,
  postgresOptions,
  runShutdownSteps,
  type ShutdownStep,
  Supervisor,
  startMetricsServer,
  systemClock,
  uuidSource,
} from '@fcd/service-kit';
import { buildFacilityApp } from './app';
import type { FacilityConfig } from './config';
import { createFacilityMetrics } from './metrics';
import { listenConnection, OutboxListener } from './outbox/listener';
import { OutboxRelay } from './outbox/relay';
import { guardedDb, SCHEMA, schemaPoolTarget } from './store/db';
import { EventBus } from './store/event-bus';
import { Ingestion } from './store/ingestion';
import { migrations } from './store/migrations';
import { echoSyncStats, outboxStats } from './store/outbox';

export interface FacilityService {
  port: number;
  metricsPort: number;
  /** Ordered shutdown: not ready → drain → stop the relay → close NATS and Postgres. */
  stop(): Promise<void>;
}

/** The schema-scoped pool, migrated; closed again when the migration fails. */
async function openDatabase(config: FacilityConfig, logger: Logger): Promise<Pool> {
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
    await pool.end().catch(() => undefined);
    throw err;
  }
  return pool;
}

/**
 * Wires the facility service from a parsed config: migrate → NATS (connects in the background)
 * → app → listen → relay. main.ts and in-process tests both use it.
 */
export async function startFacility(config: FacilityConfig, options: { clock?: Clock; logger?: Logger } = {}): Promise<FacilityService> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ service: 'facility', level: config.LOG_LEVEL });
  const pool = await openDatabase(config, logger);

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
  const app = await buildFacilityApp({
    logger,
    metrics,
    db: guardedDb(pool),
    ingestion,
    auth: new InternalAuth(config.INTERNAL_AUTH_SECRET),
    ingestToken: config.INGEST_TOKEN,
    ingestMaxBodyBytes: config.INGEST_MAX_BODY_BYTES,
    readiness: { postgres: () => pool.query('SELECT 1'), nats: () => bus.check() },
    isShuttingDown: () => shuttingDown,
    http: config,
  });
  await app.listen({ port: config.PORT, host: config.HOST });
  const metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.HOST, config);
  // The background work: the relay (when this replica runs one, RELAY_ENABLED), woken by the
  // listener when any process commits outbox rows.
  const listen = listenConnection(config, postgresOptions(config));
  const listener = listen && new OutboxListener({ connection: listen, logger, onCommit: () => relay.nudge() });
  const workers = new Supervisor(config.RELAY_ENABLED ? [relay, ...(listener ? [listener] : [])] : [], { logger });
  workers.start();

  const steps: ShutdownStep[] = [
    { name: 'not ready', run: () => (shuttingDown = true) },
    { name: 'drain keep-alive connections', run: () => drainConnections(app.server, config.HTTP_DRAIN_MS) },
    { name: 'stop accepting and drain requests', run: () => app.close() },
    { name: 'stop workers (the relay after its current batch)', run: () => workers.stop() },
    { name: 'close metrics server', run: () => new Promise((r) => metricsServer.close(() => r(undefined))) },
    { name: 'close nats', run: () => bus.close() },
    { name: 'close postgres pool', run: () => pool.end() },
  ];
  return {
    port: (app.server.address() as { port: number }).port,
    metricsPort: (metricsServer.address() as { port: number }).port,
    // Each step runs even when an earlier one failed: what is left open is closed all the same.
    stop: () => runShutdownSteps(logger, steps),
  };
}
