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
  /**
   * Bulk exports running at once per account, across every gateway replica (docs/api.md, "Bulk
   * export"): Pro accounts, and Enterprise accounts. The next one gets 429 CONCURRENCY_LIMIT_EXCEEDED.
   */
  EXPORT_CONCURRENCY_PRO: Env.int(2, 1, 100),
  EXPORT_CONCURRENCY_ENTERPRISE: Env.int(4, 1, 100),
  /**
   * Exports this replica runs at once, whatever their accounts: each holds at most one page (1,000
   * rows; 1.7–3.4 MiB of resident memory measured) while its reader is slow, so this bounds their memory (docs/operations.md,
   * "Bulk exports"). The next one gets 503 with Retry-After.
   */
  EXPORT_MAX_PER_REPLICA: Env.int(64, 1, 10_000),
  /** An export's slot lapses this long after its gateway last renewed it (a third of it), so a crashed gateway frees its slots. */
  EXPORT_SLOT_TTL_MS: Env.int(30_000, 3000, 600_000),
  /** A reader that takes no bytes of an export for this long is cut: the rest of the page and the resume line are queued. */
  EXPORT_SEND_TIMEOUT_MS: Env.int(30_000, 100, 600_000),
  /** After the cut, how long the reader has to take what was queued before the connection is closed. */
  EXPORT_SEND_GRACE_MS: Env.int(5000, 0, 60_000),
  LOG_LEVEL: Env.logLevel(),
  ...HttpServerEnv,
  ...RedisEnv,
});
export type GatewayConfig = typeof GatewayConfigSchema.static;

/** Start-up checks beyond the schema (one of REDIS_URL and REDIS_CLUSTER_NODES). */
export function gatewayConfigProblems(c: GatewayConfig): string[] {
  return redisTargetProblems(c);
}
