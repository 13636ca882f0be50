import { Env, HttpServerEnv, PostgresEnv, PostgresPoolEnv, RedisEnv, redisTargetProblems } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';

export const UsageConfigSchema = Type.Object({
  GRPC_PORT: Env.port(50051),
  PORT: Env.port(8090),
  METRICS_PORT: Env.port(9464),
  HOST: Type.String({ default: '0.0.0.0' }),
  DATABASE_URL: Env.url(),
  /** One Redis (or a Sentinel-managed primary's address); REDIS_CLUSTER_NODES instead for a Redis Cluster. */
  REDIS_URL: Type.Optional(Env.url()),
  /**
   * Redis Cluster: replicas that must hold a slot's counts before they are answered (WAIT after
   * each call; default 1). 0 when the cluster has no replicas (a failover would then lose counts).
   */
  REDIS_WAIT_REPLICAS: Env.int(1, 0, 5),
  /** Prefix of every Redis key of this deployment (tests use one per file). */
  REDIS_KEY_PREFIX: Type.String({ default: 'fcd:', pattern: '^[A-Za-z0-9:_-]*$' }),
  /** Bounded staleness of the in-process key cache: a revocation elsewhere takes effect within this time. */
  KEY_CACHE_TTL_MS: Env.int(5000, 0, 300_000),
  KEY_CACHE_NEGATIVE_TTL_MS: Env.int(1000, 0, 60_000),
  /**
   * While Postgres is unreachable, a key this replica looked up keeps being served for this long
   * past its TTL (counted in Redis as usual); revocations made meanwhile apply once Postgres answers.
   */
  KEY_CACHE_OUTAGE_TTL_MS: Env.int(3_600_000, 0, 86_400_000),
  /** Counts reach Postgres at this interval: the loss bound when Redis and this process fail together. */
  USAGE_FLUSH_INTERVAL_MS: Env.int(1000, 50, 60_000),
  /** Copies all Redis counters into Postgres at this interval (and at start-up). */
  USAGE_RECONCILE_INTERVAL_MS: Env.int(60_000, 1000, 3_600_000),
  /** Reuse of earlier days' persisted counts in usage reports (late flushes show up within this time). */
  USAGE_REPORT_CACHE_TTL_MS: Env.int(5000, 0, 300_000),
  /** Operator opt-in: with Redis down, count in Postgres instead of refusing with 503. */
  USAGE_FAIL_OPEN: Env.bool(false),
  /** Shared with the gateway and the dispatcher: every gRPC call carries a token made from it (health excepted). */
  USAGE_GRPC_SECRET: Env.secret(),
  /** Items per authorization batch; a larger batch is refused with INVALID_ARGUMENT (keep >= the gateway's AUTH_MAX_BATCH). */
  GRPC_MAX_BATCH_ITEMS: Env.int(4096, 1, 100_000),
  /** Largest gRPC request message in bytes; larger → RESOURCE_EXHAUSTED. */
  GRPC_MAX_MESSAGE_BYTES: Env.int(4 * 1024 * 1024, 64 * 1024, 64 * 1024 * 1024),
  /**
   * A gRPC connection is sent GOAWAY after this long (±10 %), so gateways resolve the replicas again
   * and spread over new ones (ADR 0011); 0 = never.
   */
  GRPC_MAX_CONNECTION_AGE_MS: Env.int(0, 0, 86_400_000),
  /** After that GOAWAY, calls still open get this long to finish (keep above the gateway's AUTH_STREAM_MAX_AGE_MS). */
  GRPC_MAX_CONNECTION_AGE_GRACE_MS: Env.int(30_000, 1000, 86_400_000),
  /** Concurrent gRPC calls per connection (HTTP/2 streams); more are refused. */
  GRPC_MAX_CONCURRENT_STREAMS: Env.int(100, 1, 10_000),
  /** The gateway's public address, in front of the portal's sign-in links (docs/api.md, "Portal"); unset: the links are paths. */
  PUBLIC_BASE_URL: Type.Optional(Env.url()),
  /** Bearer token of the internal admin API (disabled when unset). */
  ADMIN_TOKEN: Type.Optional(Type.String({ minLength: 32 })),
  MIGRATE_ON_START: Env.bool(true),
  LOG_LEVEL: Env.logLevel(),
  ...HttpServerEnv,
  ...PostgresPoolEnv,
  ...PostgresEnv,
  ...RedisEnv,
});
export type UsageConfig = typeof UsageConfigSchema.static;

/** Start-up checks beyond the schema (one of REDIS_URL and REDIS_CLUSTER_NODES). */
export function usageConfigProblems(c: UsageConfig): string[] {
  return redisTargetProblems(c);
}
