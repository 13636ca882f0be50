import pg from 'pg';
import type { Logger } from 'pino';
import { AppError, serviceUnavailable } from './errors';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

// Return BIGINT (int8) as JS numbers: our counts stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));
// DATE as the plain 'YYYY-MM-DD' string, never shifted by a local time zone.
pg.types.setTypeParser(1082, (v) => v);

export interface PoolSettings {
  connectionString: string;
  max?: number;
  applicationName: string;
  logger: Logger;
  /** Password and TLS from PostgresEnv (`postgresOptions(config)`). */
  connection?: { password?: string; ssl?: pg.PoolConfig['ssl'] };
}

/** A pg.Pool that fails fast when Postgres is down and never crashes on idle-client errors. */
export function createPool(settings: PoolSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString: settings.connectionString,
    max: settings.max ?? 10,
    connectionTimeoutMillis: 2000,
    idleTimeoutMillis: 30_000,
    query_timeout: 10_000,
    application_name: settings.applicationName,
    ...settings.connection,
  });
  pool.on('error', (err) => settings.logger.warn({ err: { message: err.message } }, 'postgres idle client error'));
  return pool;
}

/** Runs fn in one transaction on one client; rolls back on any error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

export interface Migration {
  /** Sortable, unique, never renamed: e.g. "0001_accounts". */
  id: string;
  sql: string;
}

/**
 * Applies the service's own migrations to its own schema, each in a
 * transaction, under an advisory lock so concurrent replicas (or the Helm
 * migration Job) never apply one twice.
 */
export async function migrate(pool: pg.Pool, schema: string, migrations: Migration[], logger?: Logger): Promise<string[]> {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`bad schema name: ${schema}`);
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`migrate:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set((await client.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations`)).rows.map((r) => r.id));
    for (const m of [...migrations].sort((a, b) => a.id.localeCompare(b.id))) {
      if (done.has(m.id)) continue;
      await client.query('BEGIN');
      try {
        await client.query(`SET LOCAL search_path TO ${schema}`);
        await client.query(m.sql);
        await client.query(`INSERT INTO ${schema}.schema_migrations (id) VALUES ($1)`, [m.id]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw new Error(`migration ${schema}/${m.id} failed: ${(err as Error).message}`);
      }
      applied.push(m.id);
      logger?.info({ schema, migration: m.id }, 'migration applied');
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`migrate:${schema}`]).catch(() => undefined);
    client.release();
  }
  return applied;
}

const UNAVAILABLE_SQLSTATE = /^(08|53|57P0[1-3])/;
const UNAVAILABLE_MESSAGE =
  /timeout|ECONNREFUSED|ECONNRESET|ENOTFOUND|EHOSTUNREACH|Connection terminated|connection.*closed|Client has encountered a connection error/i;
/** Values Postgres cannot store in text (NUL bytes, bad encodings): the client's input, not a bug. */
const BAD_INPUT_SQLSTATE = new Set(['22021', '22P05']);

/** True when a Postgres error means "the database is unreachable or overloaded", not a bug. */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof AppError) return false;
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e.code === 'string' && UNAVAILABLE_SQLSTATE.test(e.code)) return true;
  return typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message);
}

/**
 * Classifies a database error for the edges: an outage becomes 503 SERVICE_UNAVAILABLE
 * (Retry-After 1), text Postgres cannot store becomes 400 VALIDATION_ERROR; anything else
 * is returned unchanged (a bug).
 */
export function classifyDatabaseError(err: unknown): unknown {
  if (isDatabaseUnavailable(err)) return serviceUnavailable('postgres', 1, err);
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && BAD_INPUT_SQLSTATE.has(code)) {
    return new AppError('VALIDATION_ERROR', 'The request contains characters that cannot be stored (for example a NUL byte).', {
      details: { fields: [{ field: 'request', message: 'contains characters that cannot be stored' }] },
    });
  }
  return err;
}
