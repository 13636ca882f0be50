import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import {
  backendSettingsProblems,
  NatsEnv,
  natsOptions,
  natsServers,
  PostgresEnv,
  postgresOptions,
  RedisEnv,
  redisOptions,
} from './backends';
import { ConfigError, parseConfig } from './config';

const dir = mkdtempSync(join(tmpdir(), 'fcd-backends-'));
const ca = join(dir, 'ca.pem');
writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
const missing = join(dir, 'missing.pem');
const Schema = Type.Object({ ...PostgresEnv, ...RedisEnv, ...NatsEnv });

describe('postgresOptions', () => {
  it('maps DATABASE_SSLMODE to node-postgres ssl settings, with the CA file read', () => {
    expect(postgresOptions({})).toEqual({});
    expect(postgresOptions({ DATABASE_PASSWORD: 'pw', DATABASE_SSLMODE: 'disable' })).toEqual({ password: 'pw', ssl: false });
    expect(postgresOptions({ DATABASE_SSLMODE: 'require' })).toEqual({ ssl: { rejectUnauthorized: false } });
    expect(postgresOptions({ DATABASE_SSLMODE: 'verify-full', DATABASE_SSL_CA_FILE: ca })).toEqual({
      ssl: { ca: expect.stringContaining('BEGIN CERTIFICATE'), rejectUnauthorized: true },
    });
    const verifyCa = postgresOptions({ DATABASE_SSLMODE: 'verify-ca', DATABASE_SSL_CA_FILE: ca }).ssl as {
      checkServerIdentity: () => unknown;
    };
    expect(verifyCa).toMatchObject({ rejectUnauthorized: true });
    expect(verifyCa.checkServerIdentity()).toBeUndefined(); // verify-ca: the chain, not the host name
  });

  it('passes DATABASE_POOL_MODE=transaction on to createPool (session is the default, left out)', () => {
    expect(postgresOptions({ DATABASE_POOL_MODE: 'transaction' })).toEqual({ poolMode: 'transaction' });
    expect(postgresOptions({ DATABASE_POOL_MODE: 'session' })).toEqual({});
    expect(() => parseConfig(Schema, { DATABASE_POOL_MODE: 'statement' })).toThrow(ConfigError);
  });
});

describe('redisOptions and natsOptions', () => {
  it('turn TLS on for rediss:// and tls:// URLs or a CA file, and pass credentials', () => {
    expect(redisOptions({}, 'redis://r:6379')).toEqual({});
    expect(redisOptions({}, 'rediss://r:6380')).toEqual({ tls: {} });
    expect(redisOptions({ REDIS_USERNAME: 'usage', REDIS_PASSWORD: 'pw', REDIS_TLS_CA_FILE: ca }, 'redis://r:6380')).toEqual({
      username: 'usage',
      password: 'pw',
      tls: { ca: expect.stringContaining('BEGIN CERTIFICATE') },
    });
    expect(natsOptions({}, 'nats://n:4222')).toEqual({});
    expect(natsOptions({ NATS_USER: 'facility', NATS_PASSWORD: 'pw' }, 'tls://n:4222')).toEqual({ user: 'facility', pass: 'pw', tls: {} });
    expect(natsOptions({ NATS_TLS_CA_FILE: ca }, 'nats://n:4222').tls?.ca).toContain('BEGIN CERTIFICATE');
    expect(natsOptions({}, 'tls://a:4222, tls://b:4222')).toEqual({ tls: {} });
  });

  it('natsServers splits a comma-separated NATS_URL into the server list of a cluster', () => {
    expect(natsServers('nats://n:4222')).toEqual(['nats://n:4222']);
    expect(natsServers('nats://a:4222, nats://b:4223,nats://c:4224,')).toEqual(['nats://a:4222', 'nats://b:4223', 'nats://c:4224']);
  });
});

describe('start-up checks', () => {
  it('refuses missing files and combinations that cannot work, naming the variable and never a value', () => {
    expect(backendSettingsProblems({ REDIS_TLS_CA_FILE: ca, NATS_USER: 'u', NATS_PASSWORD: 'p' })).toEqual([]);
    expect(
      backendSettingsProblems({
        DATABASE_SSL_CA_FILE: missing,
        NATS_CREDS_FILE: missing,
        NATS_USER: 'u',
        REDIS_USERNAME: 'u',
        DATABASE_SSLMODE: 'require',
      }),
    ).toEqual([
      'DATABASE_SSL_CA_FILE: the file does not exist or is not readable',
      'NATS_CREDS_FILE: the file does not exist or is not readable',
      'NATS_CREDS_FILE: give either a creds file or NATS_USER/NATS_PASSWORD, not both',
      'REDIS_USERNAME: needs REDIS_PASSWORD',
      'DATABASE_SSL_CA_FILE: only used with DATABASE_SSLMODE verify-ca or verify-full (is require)',
    ]);
    expect(backendSettingsProblems({ NATS_PASSWORD: 'secret-value' })).toEqual(['NATS_PASSWORD: needs NATS_USER']);
    expect(backendSettingsProblems({ NATS_URL: 'nats://a:4222, nats://b:4222,tls://c:4222' })).toEqual([]);
    expect(backendSettingsProblems({ NATS_URL: 'nats://a:4222,b:4222' })).toEqual([
      'NATS_URL: each comma-separated entry must be a nats:// or tls:// URL (got "b:4222")',
    ]);
    expect(backendSettingsProblems({ REDIS_CLUSTER_NODES: 'a:7000, rediss://b.example:7001,[::1]:7002' })).toEqual([]);
    expect(backendSettingsProblems({ REDIS_CLUSTER_NODES: 'a:7000,b', REDIS_URL: 'redis://c:6379' })).toEqual([
      'REDIS_CLUSTER_NODES: each entry must be host:port (got "b")',
      'REDIS_CLUSTER_NODES: give either REDIS_URL or REDIS_CLUSTER_NODES, not both',
    ]);
  });

  it('parseConfig reports them like any other config error', () => {
    expect(() => parseConfig(Schema, { REDIS_TLS_CA_FILE: missing, REDIS_PASSWORD: 'hunter2-secret' })).toThrow(ConfigError);
    try {
      parseConfig(Schema, { REDIS_TLS_CA_FILE: missing, REDIS_PASSWORD: 'hunter2-secret' });
    } catch (err) {
      expect((err as ConfigError).problems).toEqual(['REDIS_TLS_CA_FILE: the file does not exist or is not readable']);
      expect((err as Error).message).not.toContain('hunter2');
    }
    expect(() => parseConfig(Schema, { DATABASE_SSLMODE: 'prefer' })).toThrow(ConfigError);
  });
});
