import { accessSync, constants, readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { type Authenticator, credsAuthenticator } from '@nats-io/nats-core';
import { Type } from '@sinclair/typebox';

/**
 * Credentials and TLS for the backends (Postgres, Redis, NATS), one home for every service and
 * CLI. Each comes from its own environment variables, so a platform team fills them from Secrets
 * (passwords) and mounted files (CA certificates, NATS creds) while the URLs stay plain config.
 * Start-up refuses a file that is missing or unreadable, and a combination that cannot work,
 * naming the variable; the values never reach a log line.
 */

const optionalText = () => Type.Optional(Type.String({ minLength: 1 }));

export const PostgresEnv = {
  /** Password of the DATABASE_URL user (instead of putting it in the URL). */
  DATABASE_PASSWORD: optionalText(),
  /** disable | require (encrypted, unverified) | verify-ca | verify-full (the default in production charts). */
  DATABASE_SSLMODE: Type.Optional(Type.Union(['disable', 'require', 'verify-ca', 'verify-full'].map((m) => Type.Literal(m)))),
  /** PEM file of the CA that signed the server's certificate (verify-ca, verify-full). */
  DATABASE_SSL_CA_FILE: optionalText(),
  /**
   * session (the default: Postgres itself, or a pooler in session mode) | transaction (PgBouncer
   * pool_mode=transaction: no connection keeps session state; ADR 0013, docs/operations.md).
   */
  DATABASE_POOL_MODE: Type.Optional(Type.Union([Type.Literal('session'), Type.Literal('transaction')])),
};

export const RedisEnv = {
  /**
   * A Redis Cluster instead of one Redis (REDIS_URL): comma-separated `host:port` of some of its
   * nodes (`rediss://host:port` for TLS); the client learns the others from them.
   */
  REDIS_CLUSTER_NODES: optionalText(),
  /** ACL user (Redis 6+); with REDIS_PASSWORD only, the default user. */
  REDIS_USERNAME: optionalText(),
  REDIS_PASSWORD: optionalText(),
  /** PEM CA file; TLS is on with a rediss:// URL or when this is set. */
  REDIS_TLS_CA_FILE: optionalText(),
};

export const NatsEnv = {
  NATS_USER: optionalText(),
  NATS_PASSWORD: optionalText(),
  /** A NATS .creds file (JWT + NKey seed), instead of a user and password. */
  NATS_CREDS_FILE: optionalText(),
  /** PEM CA file; TLS is on with a tls:// URL or when this is set. */
  NATS_TLS_CA_FILE: optionalText(),
};

type Settings = Record<string, unknown>;
const text = (s: Settings, key: string): string | undefined => (typeof s[key] === 'string' ? (s[key] as string) : undefined);

const FILES = ['DATABASE_SSL_CA_FILE', 'REDIS_TLS_CA_FILE', 'NATS_CREDS_FILE', 'NATS_TLS_CA_FILE'] as const;

/** Start-up checks beyond the schema: files readable, combinations that can work. */
export function backendSettingsProblems(s: Settings): string[] {
  const problems: string[] = [];
  for (const key of FILES) {
    const file = text(s, key);
    if (file === undefined) continue;
    try {
      accessSync(file, constants.R_OK);
    } catch {
      problems.push(`${key}: the file does not exist or is not readable`);
    }
  }
  if (text(s, 'NATS_PASSWORD') !== undefined && text(s, 'NATS_USER') === undefined) problems.push('NATS_PASSWORD: needs NATS_USER');
  if (text(s, 'NATS_CREDS_FILE') !== undefined && text(s, 'NATS_USER') !== undefined) {
    problems.push('NATS_CREDS_FILE: give either a creds file or NATS_USER/NATS_PASSWORD, not both');
  }
  const natsUrl = text(s, 'NATS_URL');
  if (natsUrl !== undefined) {
    const bad = natsServers(natsUrl).filter((e) => !/^(?:nats|tls|ws|wss):\/\/[^\s,]+$/.test(e));
    if (bad.length > 0)
      problems.push(`NATS_URL: each comma-separated entry must be a nats:// or tls:// URL (got ${JSON.stringify(bad[0])})`);
  }
  const clusterNodes = text(s, 'REDIS_CLUSTER_NODES');
  if (clusterNodes !== undefined) {
    const bad = clusterNodes
      .split(',')
      .map((e) => e.trim())
      .filter((e) => !/^(?:rediss?:\/\/)?(?:\[[0-9a-fA-F:.]+\]|[^:/\s]+):\d{1,5}$/.test(e));
    if (bad.length > 0) problems.push(`REDIS_CLUSTER_NODES: each entry must be host:port (got ${JSON.stringify(bad[0])})`);
    if (text(s, 'REDIS_URL') !== undefined) problems.push('REDIS_CLUSTER_NODES: give either REDIS_URL or REDIS_CLUSTER_NODES, not both');
  }
  if (text(s, 'REDIS_USERNAME') !== undefined && text(s, 'REDIS_PASSWORD') === undefined)
    problems.push('REDIS_USERNAME: needs REDIS_PASSWORD');
  const mode = text(s, 'DATABASE_SSLMODE');
  if ((mode === 'disable' || mode === 'require') && text(s, 'DATABASE_SSL_CA_FILE') !== undefined) {
    problems.push(`DATABASE_SSL_CA_FILE: only used with DATABASE_SSLMODE verify-ca or verify-full (is ${mode})`);
  }
  return problems;
}

/**
 * Pool options from PostgresEnv, for createPool's `connection` (undefined fields are left out):
 * node-postgres's password and ssl, and poolMode 'transaction' (createPool's, not node-postgres's).
 */
export function postgresOptions(s: Settings): { password?: string; ssl?: boolean | ConnectionOptions; poolMode?: 'transaction' } {
  const out: { password?: string; ssl?: boolean | ConnectionOptions; poolMode?: 'transaction' } = {};
  if (text(s, 'DATABASE_POOL_MODE') === 'transaction') out.poolMode = 'transaction';
  const password = text(s, 'DATABASE_PASSWORD');
  if (password !== undefined) out.password = password;
  const mode = text(s, 'DATABASE_SSLMODE');
  const caFile = text(s, 'DATABASE_SSL_CA_FILE');
  const ca = caFile === undefined ? {} : { ca: readFileSync(caFile, 'utf8') };
  if (mode === 'disable') out.ssl = false;
  else if (mode === 'require') out.ssl = { rejectUnauthorized: false };
  else if (mode === 'verify-ca') out.ssl = { ...ca, rejectUnauthorized: true, checkServerIdentity: () => undefined };
  else if (mode === 'verify-full') out.ssl = { ...ca, rejectUnauthorized: true };
  return out;
}

/** ioredis options from RedisEnv and the URL's scheme. */
export function redisOptions(s: Settings, url: string): { username?: string; password?: string; tls?: ConnectionOptions } {
  const out: { username?: string; password?: string; tls?: ConnectionOptions } = {};
  const username = text(s, 'REDIS_USERNAME');
  const password = text(s, 'REDIS_PASSWORD');
  if (username !== undefined) out.username = username;
  if (password !== undefined) out.password = password;
  const caFile = text(s, 'REDIS_TLS_CA_FILE');
  if (caFile !== undefined || url.startsWith('rediss://')) out.tls = caFile === undefined ? {} : { ca: readFileSync(caFile, 'utf8') };
  return out;
}

/** The parts of a NATS connect() call that NatsEnv fills. */
export interface NatsAuthOptions {
  user?: string;
  pass?: string;
  /** From NATS_CREDS_FILE (JWT and NKey seed). */
  authenticator?: Authenticator;
  tls?: { ca?: string };
}

/**
 * The servers of NATS_URL: one URL, or several comma-separated (`nats://a:4222,nats://b:4222`), as
 * for a cluster. The client connects to one of them, and reconnects to another when it is lost.
 */
export function natsServers(url: string): string[] {
  return url
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
}

export function natsOptions(s: Settings, url: string): NatsAuthOptions {
  const out: NatsAuthOptions = {};
  const user = text(s, 'NATS_USER');
  const pass = text(s, 'NATS_PASSWORD');
  if (user !== undefined) out.user = user;
  if (pass !== undefined) out.pass = pass;
  const credsFile = text(s, 'NATS_CREDS_FILE');
  if (credsFile !== undefined) out.authenticator = credsAuthenticator(readFileSync(credsFile));
  const caFile = text(s, 'NATS_TLS_CA_FILE');
  if (caFile !== undefined || natsServers(url).some((u) => u.startsWith('tls://'))) {
    out.tls = caFile === undefined ? {} : { ca: readFileSync(caFile, 'utf8') };
  }
  return out;
}
