import { Env, HttpServerEnv, NatsEnv, PostgresEnv, PostgresPoolEnv } from '@fcd/service-kit';
import { type Static, Type } from '@sinclair/typebox';

/** Environment of the facility service (HTTP API, ingestion API and outbox relay). */
export const FacilityConfigSchema = Type.Object({
  PORT: Env.port(8081),
  METRICS_PORT: Env.port(9465),
  HOST: Type.String({ default: '0.0.0.0' }),
  DATABASE_URL: Env.url(),
  PG_POOL_MAX: Env.int(10, 1, 200),
  /** One NATS URL, or a cluster's servers comma-separated (`nats://a:4222,nats://b:4222`). */
  NATS_URL: Env.url('nats://127.0.0.1:4222'),
  INTERNAL_AUTH_SECRET: Env.secret(),
  INGEST_TOKEN: Env.secret(),
  /** Largest body the ingestion API accepts (the public limit of 64 KiB does not apply to it). */
  INGEST_MAX_BODY_BYTES: Env.int(16 * 1024 * 1024, 1024, 512 * 1024 * 1024),
  EVENTS_STREAM: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', default: 'EVENTS' }),
  EVENTS_SUBJECT_PREFIX: Type.String({ pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', default: 'events' }),
  /**
   * Copies JetStream keeps of EVENTS when this service creates it (1 = one server; 3 on a
   * cluster of 3+ servers, so a server lost keeps every event). An existing stream is not changed.
   */
  NATS_STREAM_REPLICAS: Env.int(1, 1, 5),
  /** Idle wait between outbox polls when the last batch was not full. */
  OUTBOX_POLL_MS: Env.int(200, 10, 60_000),
  OUTBOX_BATCH_SIZE: Env.int(500, 1, 5000),
  /** Sent outbox rows older than this are deleted by the relay (0 = keep forever). */
  OUTBOX_RETENTION_HOURS: Env.int(168, 0, 100_000),
  RELAY_ENABLED: Env.bool(true),
  /**
   * The relay LISTENs for outbox commits of any process and relays at once; OUTBOX_POLL_MS stays
   * the fallback. Off: poll only.
   */
  OUTBOX_LISTEN: Env.bool(true),
  /**
   * A direct (session) connection for the LISTEN, when DATABASE_URL goes through PgBouncer in
   * transaction mode, which cannot hold one (same user, password and TLS settings). Without it,
   * a transaction-pooled relay polls only.
   */
  OUTBOX_LISTEN_DATABASE_URL: Type.Optional(Env.url()),
  LOG_LEVEL: Env.logLevel(),
  ...HttpServerEnv,
  ...PostgresPoolEnv,
  ...PostgresEnv,
  ...NatsEnv,
});

export type FacilityConfig = Readonly<Static<typeof FacilityConfigSchema>>;

/** The CLI (migrate, import, seed, simulate) only talks to Postgres. */
export const CliConfigSchema = Type.Object({
  DATABASE_URL: Env.url(),
  ...PostgresEnv,
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'warn' },
  ),
});

export type CliConfig = Readonly<Static<typeof CliConfigSchema>>;
