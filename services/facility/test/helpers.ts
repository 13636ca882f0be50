import type { EventEnvelope } from '@fcd/events';
import {
  type Check,
  type Clock,
  createLogger,
  createPool,
  type IdSource,
  InternalAuth,
  type Logger,
  migrate,
  type Pool,
  systemClock,
} from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { buildFacilityApp } from '../src/app';
import { createFacilityMetrics, type FacilityMetrics } from '../src/metrics';
import { guardedDb, SCHEMA, schemaConnectionString } from '../src/store/db';
import { Ingestion } from '../src/store/ingestion';
import { migrations } from '../src/store/migrations';
import { outboxStats } from '../src/store/outbox';

export const AUTH_SECRET = 'facility-test-internal-auth-secret-0123456789';
export const INGEST_TOKEN = 'facility-test-ingest-token-abcdefghijklmnop';
export const silentLogger: Logger = createLogger({ service: 'facility-test', level: 'silent' });

export interface TestDb {
  database: TestDatabase;
  pool: Pool;
  /** The connection string with the facility search_path (what the service uses). */
  url: string;
  close(): Promise<void>;
}

/** A fresh database for one test file, migrated. */
export async function setupDb(label: string): Promise<TestDb> {
  const database = await createTestDatabase(label);
  const url = schemaConnectionString(database.url);
  const pool = createPool({ connectionString: url, max: 8, applicationName: `test-${label}`, logger: silentLogger });
  await migrate(pool, SCHEMA, migrations);
  return {
    database,
    pool,
    url,
    async close() {
      await pool.end();
      await database.drop();
    },
  };
}

/** Deterministic UUIDs: 00000000-0000-4000-8000-000000000001, ... */
export function sequentialIds(prefix = 0): IdSource {
  let n = 0;
  return () => `${String(prefix).padStart(8, '0')}-0000-4000-8000-${String(++n).padStart(12, '0')}`;
}

/** The gateway's signed header for one request to the facility service (method, path with query). */
export function accountHeader(method: string, path: string, secret = AUTH_SECRET, clock: Clock = systemClock): string {
  return new InternalAuth(secret, undefined, clock).sign(
    { account_id: 'acct_test', tier: 'pro', tier_rank: 1, request_id: 'req_test' },
    { audience: 'facility', method, path },
  );
}

export interface TestApp {
  app: FastifyInstance;
  ingestion: Ingestion;
  metrics: FacilityMetrics;
}

export async function buildTestApp(
  pool: Pool,
  options: { clock?: Clock; ids?: IdSource; readiness?: Record<string, Check>; shuttingDown?: () => boolean } = {},
): Promise<TestApp> {
  const clock = options.clock ?? systemClock;
  const metrics = createFacilityMetrics(() => outboxStats(pool, new Date(clock.now()).toISOString()));
  const ingestion = new Ingestion({ pool, clock, ids: options.ids ?? sequentialIds(), rowsCounter: metrics.ingestRows });
  const app = await buildFacilityApp({
    logger: silentLogger,
    metrics,
    db: guardedDb(pool),
    ingestion,
    auth: new InternalAuth(AUTH_SECRET),
    ingestToken: INGEST_TOKEN,
    ingestMaxBodyBytes: 16 * 1024 * 1024,
    readiness: options.readiness ?? { postgres: () => pool.query('SELECT 1') },
    ...(options.shuttingDown ? { isShuttingDown: options.shuttingDown } : {}),
  });
  await app.ready();
  return { app, ingestion, metrics };
}

/** Polls until `check` returns a value other than undefined (for work done by another process or loop). */
export async function waitFor<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function pendingOutbox(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL');
  return rows[0]?.n ?? 0;
}

export interface StreamMessage {
  seq: number;
  subject: string;
  msgId: string | undefined;
  envelope: EventEnvelope;
}

/** Every message of a stream, in order. */
export async function readStream(jsm: JetStreamManager, stream: string): Promise<StreamMessage[]> {
  const info = await jsm.streams.info(stream);
  const out: StreamMessage[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq });
    if (!m) continue;
    out.push({ seq: m.seq, subject: m.subject, msgId: m.header.get('Nats-Msg-Id') || undefined, envelope: m.json<EventEnvelope>() });
  }
  return out;
}

export async function streamCount(jsm: JetStreamManager, stream: string): Promise<number> {
  try {
    return (await jsm.streams.info(stream)).state.messages;
  } catch {
    return 0;
  }
}

export async function natsManager(url: string): Promise<{ nc: NatsConnection; jsm: JetStreamManager }> {
  const nc = await connect({ servers: url });
  return { nc, jsm: await jetstreamManager(nc) };
}

/** A private JetStream server the tests stop and restart (@fcd/testing). */
export { PrivateNats } from '@fcd/testing';
