import { Env, HttpServerEnv } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';

export const GatewayConfigSchema = Type.Object({
  PORT: Env.port(8080),
  METRICS_PORT: Env.port(9463),
  HOST: Type.String({ default: '0.0.0.0' }),
  /** host:port of the usage service's gRPC endpoint. */
  USAGE_GRPC_ADDRESS: Type.String({ minLength: 3, default: '127.0.0.1:50051' }),
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
  /** Total time allowed for a call to a domain service. */
  UPSTREAM_TIMEOUT_MS: Env.int(10_000, 100, 60_000),
  UPSTREAM_CONNECTIONS: Env.int(64, 1, 1024),
  LOG_LEVEL: Env.logLevel(),
  ...HttpServerEnv,
});
export type GatewayConfig = typeof GatewayConfigSchema.static;
