import { Env, HttpServerEnv, NatsEnv, PostgresEnv, PostgresPoolEnv, parseConfig } from '@fcd/service-kit';
import { DEFAULT_EVENT_RETENTION_DAYS, MAX_EVENT_RETENTION_DAYS, MIN_EVENT_RETENTION_DAYS, SECRET_KEY_PATTERN } from '@fcd/webhooks';
import { type Static, Type } from '@sinclair/typebox';
import { RETRY_SCHEDULE_PATTERN } from './domain/retry';

/** Every setting of the dispatcher, parsed once from the environment (docs/dispatcher.md). */
export const DispatcherConfigSchema = Type.Object({
  PORT: Env.port(8083),
  METRICS_PORT: Env.port(9467),
  HOST: Type.String({ default: '0.0.0.0' }),
  DATABASE_URL: Env.url(),
  PG_POOL_MAX: Env.int(20, 2, 200),
  /** One NATS URL, or a cluster's servers comma-separated (`nats://a:4222,nats://b:4222`). */
  NATS_URL: Env.url('nats://127.0.0.1:4222'),
  /** Same names as the facility service, so tests isolate. */
  EVENTS_STREAM: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', default: 'EVENTS' }),
  EVENTS_SUBJECT_PREFIX: Type.String({ pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', default: 'events' }),
  /**
   * Copies JetStream keeps of EVENTS when this service creates it (1 = one server; 3 on a
   * cluster of 3+ servers, so a server lost keeps every event). An existing stream is not changed.
   */
  NATS_STREAM_REPLICAS: Env.int(1, 1, 5),
  /** Durable pull consumer name, shared by every replica. */
  DISPATCHER_CONSUMER: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', default: 'dispatcher' }),
  /** Where a newly created consumer starts: every stored event, or only new ones. */
  DISPATCHER_DELIVER_POLICY: Type.Union([Type.Literal('all'), Type.Literal('new')], { default: 'all' }),
  /** 32 bytes, base64: the key the webhook service encrypts secrets with (same value). */
  WEBHOOK_SECRET_KEY: Type.String({ pattern: SECRET_KEY_PATTERN }),
  WEBHOOK_SECRET_KEY_PREVIOUS: Type.Optional(
    Type.String({ pattern: `^(${SECRET_KEY_PATTERN.slice(1, -1)})(\\s*,\\s*${SECRET_KEY_PATTERN.slice(1, -1)})*$` }),
  ),
  /** Delays after each failed attempt: ms numbers or with a unit (`200ms`, `1m`, `2h`), comma-separated. */
  WEBHOOK_RETRY_SCHEDULE: Type.String({ pattern: RETRY_SCHEDULE_PATTERN, default: '1m,5m,30m,2h,12h' }),
  /** Spread of each scheduled retry delay, in percent (±); Retry-After answers are not spread. */
  WEBHOOK_RETRY_JITTER_PERCENT: Env.int(20, 0, 50),
  WEBHOOK_CONNECT_TIMEOUT_MS: Env.int(5000, 10, 60_000),
  WEBHOOK_TIMEOUT_MS: Env.int(10_000, 10, 120_000),
  /** Development and tests only: http and private/loopback destinations (cloud metadata stays refused). */
  WEBHOOK_ALLOW_PRIVATE_URLS: Env.bool(false),
  /**
   * Ports a receiver URL may use, comma-separated (shared by the webhook service, which refuses other
   * ports, and the dispatcher, whose egress NetworkPolicy opens only these). Not enforced with
   * WEBHOOK_ALLOW_PRIVATE_URLS.
   */
  WEBHOOK_ALLOWED_PORTS: Type.String({ default: '443', pattern: '^\\s*\\d{1,5}\\s*(,\\s*\\d{1,5}\\s*)*$' }),
  /**
   * The rate limit (attempts started per second, over every replica) of subscriptions whose
   * rate_limit_per_second is null; 0 = none (only their max_in_flight applies).
   */
  WEBHOOK_DEFAULT_RATE_LIMIT_PER_SECOND: Env.int(0, 0, 1000),
  /** Connection failures or timeouts in a row that pause a subscription, then probed one delivery at a time. */
  WEBHOOK_BREAKER_THRESHOLD: Env.int(5, 1, 1000),
  /** How long each of them pauses it. */
  WEBHOOK_BREAKER_COOLDOWN_MS: Env.int(30_000, 10, 3_600_000),
  /** Sends in flight per replica. */
  DISPATCHER_CONCURRENCY: Env.int(64, 1, 1000),
  /** Idle wait between polls for due deliveries (a new event wakes the worker at once). */
  DISPATCHER_POLL_MS: Env.int(500, 10, 60_000),
  /** Events fetched from JetStream per pull. */
  DISPATCHER_FETCH_BATCH: Env.int(100, 1, 1000),
  USER_AGENT: Type.String({ default: 'FacilityCompliance-Webhooks/1.0', minLength: 1 }),
  /**
   * host:port of the usage service's gRPC API: before sending, the dispatcher
   * checks that each account is still Pro or above. Unset: not checked.
   */
  USAGE_GRPC_ADDRESS: Type.Optional(Type.String({ minLength: 3 })),
  /** Shared with the usage service: each gRPC call carries a token made from it (required with USAGE_GRPC_ADDRESS). */
  USAGE_GRPC_SECRET: Type.Optional(Env.secret()),
  /** How long an account's tier is trusted (a downgrade stops deliveries within this time). */
  ENTITLEMENT_CACHE_TTL_MS: Env.int(60_000, 10, 3_600_000),
  /** Days the event log (recovery, GET /v1/events) keeps an event; same value on the webhook service. */
  EVENT_RETENTION_DAYS: Env.int(DEFAULT_EVENT_RETENTION_DAYS, MIN_EVENT_RETENTION_DAYS, MAX_EVENT_RETENTION_DAYS),
  /** How often the event log is pruned of events past the retention (also once at start). */
  EVENT_PRUNE_INTERVAL_MS: Env.int(3_600_000, 1000, 86_400_000),
  LOG_LEVEL: Env.logLevel(),
  ...HttpServerEnv,
  ...PostgresPoolEnv,
  ...PostgresEnv,
  ...NatsEnv,
});

export type DispatcherConfig = Readonly<Static<typeof DispatcherConfigSchema>>;

export function loadConfig(env: Record<string, string | undefined> = process.env): DispatcherConfig {
  return parseConfig(DispatcherConfigSchema, env);
}
