import { Env, HttpServerEnv, PostgresEnv, PostgresPoolEnv } from '@fcd/service-kit';
import { DEFAULT_EVENT_RETENTION_DAYS, MAX_EVENT_RETENTION_DAYS, MIN_EVENT_RETENTION_DAYS, SECRET_KEY_PATTERN } from '@fcd/webhooks';
import { type Static, Type } from '@sinclair/typebox';

/** Every setting of the webhook service, parsed once from the environment (docs/webhooks.md). */
export const WebhookConfigSchema = Type.Object({
  PORT: Env.port(8082),
  METRICS_PORT: Env.port(9466),
  HOST: Type.String({ default: '0.0.0.0' }),
  DATABASE_URL: Env.url(),
  /** Shared with the gateway: verifies the signed x-fcd-account header. */
  INTERNAL_AUTH_SECRET: Env.secret(),
  /** 32 bytes, base64: encrypts webhook signing secrets at rest (AES-256-GCM). */
  WEBHOOK_SECRET_KEY: Type.String({ pattern: SECRET_KEY_PATTERN }),
  /** Comma-separated previous keys, still accepted for decryption after a rotation. */
  WEBHOOK_SECRET_KEY_PREVIOUS: Type.Optional(
    Type.String({ pattern: `^(${SECRET_KEY_PATTERN.slice(1, -1)})(\\s*,\\s*${SECRET_KEY_PATTERN.slice(1, -1)})*$` }),
  ),
  FACILITY_URL: Env.url(),
  /** Local development and tests only: allow http and private/loopback destinations. */
  WEBHOOK_ALLOW_PRIVATE_URLS: Env.bool(false),
  /**
   * Ports a receiver URL may use, comma-separated (shared by the webhook service, which refuses other
   * ports, and the dispatcher, whose egress NetworkPolicy opens only these). Not enforced with
   * WEBHOOK_ALLOW_PRIVATE_URLS.
   */
  WEBHOOK_ALLOWED_PORTS: Type.String({ default: '443', pattern: '^\\s*\\d{1,5}\\s*(,\\s*\\d{1,5}\\s*)*$' }),
  WEBHOOK_MAX_SUBSCRIPTIONS: Env.int(25, 1, 10_000),
  /** Days the dispatcher keeps events in the log: the farthest back a recovery may reach. Same value on the dispatcher. */
  EVENT_RETENTION_DAYS: Env.int(DEFAULT_EVENT_RETENTION_DAYS, MIN_EVENT_RETENTION_DAYS, MAX_EVENT_RETENTION_DAYS),
  LOG_LEVEL: Env.logLevel(),
  ...HttpServerEnv,
  ...PostgresPoolEnv,
  ...PostgresEnv,
});

export type WebhookConfig = Static<typeof WebhookConfigSchema>;
