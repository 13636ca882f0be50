import { Env, HttpServerEnv, RedisEnv, redisTargetProblems } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';

export const GatewayConfigSchema = Type.Object({
  PORT: Env.port(8080),
  METRICS_PORT: Env.port(9463),
  HOST: Type.String({ default: '0.0.0.0' }),
  /**
   * The usage service's gRPC target: host:port, or `dns:///<headless-service>:<port>` to reach every
   * usage replica (each address it resolves to is one replica; ADR 0011).
   */
  USAGE_GRPC_ADDRESS: Type.String({ minLength: 3, default: '127.0.0.1:50051' }),
  /** grpc-js load balancing over the resolved addresses: `round_robin` spreads new streams across replicas. */
  USAGE_GRPC_LB_POLICY: Type.Union([Type.Literal('round_robin'), Type.Literal('pick_first')], { default: 'round_robin' }),
  /** Least time between two DNS resolutions of a `dns:` target (grpc-js re-resolves when a connection ends, e.g. at its max age). */
  USAGE_GRPC_DNS_MIN_INTERVAL_MS: Env.int(5000, 100, 300_000),
  /** Authorization streams kept open to usage; batches go to each in turn (one stream lands on one replica). */
  AUTH_STREAMS: Env.int(4, 1, 64),
  /**
   * A stream takes new batches this long (80–100 %), then is closed cleanly and replaced, so new replicas
   * get their share. Keep below usage's GRPC_MAX_CONNECTION_AGE_GRACE_MS.
   */
  AUTH_STREAM_MAX_AGE_MS: Env.int(0, 0, 3_600_000),
  FACILITY_URL: Env.url('http://127.0.0.1:8081'),
  WEBHOOK_URL: Env.url('http://127.0.0.1:8082'),
  /** Shared with the domain services: signs the forwarded account header. */
  INTERNAL_AUTH_SECRET: Env.secret(),
  /** Shared with the usage service: each gRPC call carries a token made from it. */
  USAGE_GRPC_SECRET: Env.secret(),
  /** Deadline of one authorization batch. */
  AUTH_DEADLINE_MS: Env.int(2000, 50, 30_000),
  /** Largest batch sent in one stream message (at most the usage service's GRPC_MAX_BATCH_ITEMS). */
  AUTH_MAX_BATCH: Env.int(1024, 1, 4096),
  /** A call to a domain service: its answer's headers within this, and no silence in its body this long; in total for writes (idempotent POSTs). */
  UPSTREAM_TIMEOUT_MS: Env.int(10_000, 100, 60_000),
  UPSTREAM_CONNECTIONS: Env.int(64, 1, 1024),
  /** Redis of the Idempotency-Key records (docs/api.md, "Idempotent POSTs"); may be the usage service's. */
  REDIS_URL: Type.Optional(Env.url()),
  /** Prefix of every Redis key of this deployment (the same as the usage service's). */
  REDIS_KEY_PREFIX: Type.String({ default: 'fcd:', pattern: '^[A-Za-z0-9:_-]*$' }),
  /** How long the answer of a POST with an Idempotency-Key is replayed. */
  IDEMPOTENCY_TTL_SECONDS: Env.int(86_400, 60, 7 * 86_400),
  LOG_LEVEL: Env.logLevel(),
  ...HttpServerEnv,
  ...RedisEnv,
});
export type GatewayConfig = typeof GatewayConfigSchema.static;

/** Start-up checks beyond the schema (one of REDIS_URL and REDIS_CLUSTER_NODES). */
export function gatewayConfigProblems(c: GatewayConfig): string[] {
  return redisTargetProblems(c);
}
