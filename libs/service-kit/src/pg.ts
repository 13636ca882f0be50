import type { Socket } from 'node:net';
import { Type } from '@sinclair/typebox';
import pg from 'pg';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { Env } from './config';
import { AppError, serviceUnavailable } from './errors';

export type Pool = pg.Pool;

const SCHEMA_NAME = /^[a-z_][a-z0-9_]*$/;
export type PoolClient = pg.PoolClient;

// Return BIGINT (int8) as JS numbers: our counts stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));
// DATE as the plain 'YYYY-MM-DD' string, never shifted by a local time zone.
pg.types.setTypeParser(1082, (v) => v);

/**
 * The pool's timeouts and connection lifetime, from the environment of every service that talks to
 * Postgres. A black-holed or failed-over server ends a request within PG_CONNECT_TIMEOUT_MS (no
 * connection) or PG_QUERY_TIMEOUT_MS (a query with no answer); PG_MAX_LIFETIME_S and
 * PG_IDLE_TIMEOUT_MS retire connections so they re-balance onto a new primary after a failover.
 */
export const PostgresPoolEnv = {
  PG_CONNECT_TIMEOUT_MS: Env.int(2000, 100, 60_000),
  PG_QUERY_TIMEOUT_MS: Env.int(10_000, 100, 600_000),
  PG_IDLE_TIMEOUT_MS: Env.int(30_000, 1000, 3_600_000),
  PG_MAX_LIFETIME_S: Env.int(1800, 0, 86_400),
};
export const PostgresPoolEnvSchema = Type.Object(PostgresPoolEnv);

export interface PoolTimeouts {
  PG_CONNECT_TIMEOUT_MS?: number;
  PG_QUERY_TIMEOUT_MS?: number;
  PG_IDLE_TIMEOUT_MS?: number;
  PG_MAX_LIFETIME_S?: number;
}

export interface PoolSettings {
  connectionString: string;
  max?: number;
  applicationName: string;
  logger: Logger;
  /** Timeouts and lifetime (PostgresPoolEnv); defaults as there. */
  timeouts?: PoolTimeouts;
  /** Where fcd_postgres_errors_total is registered (the service's metrics registry). */
  registry?: Registry;
  /** Password, TLS and pool mode from PostgresEnv (`postgresOptions(config)`). */
  connection?: { password?: string; ssl?: pg.PoolConfig['ssl']; poolMode?: PoolMode };
  /**
   * The schema the service's SQL names its tables in, unqualified. Only used with poolMode
   * 'transaction' (each transaction sets it with SET LOCAL); a direct connection sets it in the
   * connection string instead (facility's `schemaConnectionString`).
   */
  searchPath?: string;
}

/**
 * How DATABASE_URL reaches Postgres (DATABASE_POOL_MODE): 'session' (directly, or a pooler in
 * session mode; the default) or 'transaction' (PgBouncer pool_mode=transaction, ADR 0013): then no
 * connection carries session state, so statement_timeout (and searchPath) are set with SET LOCAL
 * at the start of every transaction instead of as startup parameters PgBouncer refuses.
 */
export type PoolMode = 'session' | 'transaction';

interface TransactionSettings {
  statementTimeoutMs: number;
  searchPath?: string;
}
/** Pools in transaction pooling mode: what each of their transactions sets first. */
const transactionPooled = new WeakMap<pg.Pool, TransactionSettings>();

/** Kinds of fcd_postgres_errors_total: an idle pooled client, a checked-out client, or a failed query/connect. */
export type PostgresErrorKind = 'idle_client' | 'checked_out_client' | 'unavailable';

const errorCounters = new WeakMap<pg.Pool, (kind: PostgresErrorKind) => void>();
const poolCounters = new WeakMap<pg.Pool, { counter?: Counter<'kind'> }>();

/** Counts the pool's errors on fcd_postgres_errors_total{kind} in a registry (for pools made before the registry). */
export function instrumentPool(pool: pg.Pool, registry: Registry): void {
  const state = poolCounters.get(pool);
  if (state) state.counter = postgresErrorCounter(registry);
}

/** What closeWhenSilent reads of a pg client: its socket and whether a statement is out. */
interface ClientInternals {
  connection: { stream: Socket };
  readyForQuery: boolean;
}

/**
 * The client side of PG_QUERY_TIMEOUT_MS: a connection with a statement out that hears nothing
 * from Postgres for `ms` (a hung server, a black-holed path) is destroyed with a "Query read
 * timeout" error, which fails the statement as unavailable (503 or a retry); its 'error' reaches
 * the listener pool.query or checkout holds, and the pool drops the client. A slow statement is
 * bounded by the server's statement_timeout (PgBouncer's query_timeout under transaction pooling),
 * which answers with an error. An idle connection, in the pool or between a transaction's
 * statements, is left alone.
 *
 * This replaces pg's own `query_timeout`, whose timer and callback wrapper are made inside
 * `Client#query`: with it every query's result outlived the next young-generation collection and
 * was copied into the old generation (docs/benchmarks/history/2026-11-29.md). A socket timeout
 * costs nothing per statement: the socket's activity moves one timer that already exists.
 */
function closeWhenSilent(client: pg.PoolClient, ms: number): void {
  const internals = client as unknown as ClientInternals;
  const socket = internals.connection.stream;
  socket.setTimeout(ms);
  // `on`, not setTimeout's callback (a `once` listener): the timeout fires at every silence.
  socket.on('timeout', () => {
    if (internals.readyForQuery) return;
    socket.destroy(new Error(`Query read timeout: no answer from Postgres within ${ms} ms`));
  });
}

/** A pg.Pool that fails fast when Postgres is down and never crashes on client errors. */
export function createPool(settings: PoolSettings): pg.Pool {
  const t = settings.timeouts ?? {};
  const queryTimeout = t.PG_QUERY_TIMEOUT_MS ?? 10_000;
  const { poolMode, ...connection } = settings.connection ?? {};
  const transactionMode = poolMode === 'transaction';
  if (settings.searchPath !== undefined && !SCHEMA_NAME.test(settings.searchPath))
    throw new Error(`bad schema name: ${settings.searchPath}`);
  const pool = new pg.Pool({
    connectionString: settings.connectionString,
    max: settings.max ?? 10,
    connectionTimeoutMillis: t.PG_CONNECT_TIMEOUT_MS ?? 2000,
    idleTimeoutMillis: t.PG_IDLE_TIMEOUT_MS ?? 30_000,
    maxLifetimeSeconds: t.PG_MAX_LIFETIME_S ?? 1800,
    // No `query_timeout`: closeWhenSilent bounds a statement with no answer instead (see there).
    // The server gives up too, so a slow statement does not hold a backend after the client left
    // (a startup parameter; under transaction pooling SET LOCAL in each transaction instead).
    ...(transactionMode ? {} : { statement_timeout: queryTimeout }),
    application_name: settings.applicationName,
    ...connection,
  });
  if (transactionMode) {
    transactionPooled.set(pool, {
      statementTimeoutMs: queryTimeout,
      ...(settings.searchPath !== undefined ? { searchPath: settings.searchPath } : {}),
    });
  }
  const state: { counter?: Counter<'kind'> } = {};
  const count = (kind: PostgresErrorKind) => state.counter?.inc({ kind });
  errorCounters.set(pool, count);
  poolCounters.set(pool, state);
  if (settings.registry) instrumentPool(pool, settings.registry);
  // Counts failed pool.query calls (promise form) too; the caller still gets the rejection.
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  // Under transaction pooling, SQL that relies on the search_path runs in a transaction that sets it
  // (one statement outside a transaction could land on any server connection, with any search_path).
  const inTransaction = transactionMode && settings.searchPath !== undefined;
  pool.query = ((...args: unknown[]) => {
    if (inTransaction && typeof args[args.length - 1] !== 'function') {
      return withTransaction(pool, (client) => (client.query as (...a: unknown[]) => Promise<unknown>)(...args));
    }
    const result = query(...args);
    if (result instanceof Promise) result.catch((err: unknown) => countPostgresError(pool, err));
    return result;
  }) as typeof pool.query;
  pool.on('connect', (client) => closeWhenSilent(client, queryTimeout));
  pool.on('error', (err) => {
    count('idle_client');
    settings.logger.warn({ err: { message: err.message } }, 'postgres idle client error');
  });
  return pool;
}

function postgresErrorCounter(registry: Registry): Counter<'kind'> {
  const existing = registry.getSingleMetric('fcd_postgres_errors_total');
  if (existing) return existing as Counter<'kind'>;
  return new Counter({
    name: 'fcd_postgres_errors_total',
    help: 'Postgres errors by kind: idle_client, checked_out_client (connection lost), unavailable (refused, timed out, terminated)',
    labelNames: ['kind'],
    registers: [registry],
  });
}

/** Counts an error on a pool's fcd_postgres_errors_total when it means "Postgres unavailable". */
export function countPostgresError(pool: pg.Pool, err: unknown): void {
  if (isDatabaseUnavailable(err)) errorCounters.get(pool)?.('unavailable');
}

/**
 * Checks a client out with an 'error' listener for as long as it is held: a checked-out pg client
 * that loses its connection (a terminated backend, a failover, a fast shutdown) emits 'error', and
 * with no listener that is an unhandled 'error' event that kills the process. `release()` destroys
 * the client when it broke (or when `err` says the connection is gone).
 *
 * The listener is added in pool.connect's callback, in the same turn the pool hands the client
 * over, never after an `await`: a new client is handed over from inside the parsing of its
 * ReadyForQuery, and when a backend is terminated right after its startup, the FATAL
 * ErrorResponse behind it in the same socket read is parsed before any promise continuation runs.
 */
export async function checkout(pool: pg.Pool): Promise<{ client: pg.PoolClient; release(err?: unknown): void }> {
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken ??= err;
    errorCounters.get(pool)?.('checked_out_client');
  };
  let client: pg.PoolClient;
  try {
    client = await new Promise<pg.PoolClient>((resolve, reject) => {
      pool.connect((err, c) => {
        if (err || !c) return reject(err ?? new Error('pool.connect gave no client'));
        c.on('error', onError);
        resolve(c);
      });
    });
  } catch (err) {
    countPostgresError(pool, err);
    throw err;
  }
  let released = false;
  return {
    client,
    release(err?: unknown) {
      if (released) return;
      released = true;
      client.removeListener('error', onError);
      const gone = broken ?? (isDatabaseUnavailable(err) ? (err as Error) : undefined);
      client.release(gone ?? false);
    },
  };
}

/** Runs fn in one transaction on one client; rolls back on any error. */
export function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withTransactionFrom(pool, undefined, fn);
}

/**
 * `withTransaction` whose first statement goes out with the BEGIN, in one round trip (one
 * simple-protocol message, which Postgres runs in order): `first` takes no parameters, so it may
 * inline only values its caller has checked. A function is called once a client is held, just
 * before the message goes. `fn` gets the rows that statement returned.
 */
export async function withTransactionFrom<R extends pg.QueryResultRow, T>(
  pool: pg.Pool,
  first: string | (() => string) | undefined,
  fn: (client: pg.PoolClient, rows: R[]) => Promise<T>,
): Promise<T> {
  const held = await checkout(pool);
  const { client } = held;
  let failure: unknown;
  try {
    const sql = typeof first === 'function' ? first() : first;
    const begun: unknown = await client.query(`BEGIN${transactionPrelude(pool)}${sql === undefined ? '' : `; ${sql}`}`);
    const last = (Array.isArray(begun) ? begun.at(-1) : begun) as pg.QueryResult<R>;
    const result = await fn(client, first === undefined ? [] : last.rows);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    failure = err;
    countPostgresError(pool, err);
    if (!isDatabaseUnavailable(err)) await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    held.release(failure);
  }
}

/**
 * What a transaction sets first on a transaction-pooled pool (after BEGIN, in the same round trip):
 * the pool's statement_timeout and search_path, with SET LOCAL; '' on a direct pool.
 */
function transactionPrelude(pool: pg.Pool): string {
  const t = transactionPooled.get(pool);
  if (!t) return '';
  const path = t.searchPath !== undefined ? `; SET LOCAL search_path TO ${t.searchPath}` : '';
  return `; SET LOCAL statement_timeout = ${t.statementTimeoutMs}${path}`;
}

export interface Migration {
  /** Sortable, unique, never renamed: e.g. "0001_accounts". */
  id: string;
  sql: string;
}

/**
 * Applies the service's own migrations to its own schema, each in a transaction, under an
 * advisory lock so concurrent replicas (or the Helm migration Job) never apply one twice. The lock
 * is transaction-scoped (pg_advisory_xact_lock), taken first in every transaction here, so it works
 * through PgBouncer in transaction pooling mode (a session lock would be held by, and released on,
 * whichever server connection the pooler picked): one migrator at a time creates the schema, and
 * each migration is checked and applied by one migrator at a time, in id order.
 */
export async function migrate(pool: pg.Pool, schema: string, migrations: Migration[], logger?: Logger): Promise<string[]> {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`bad schema name: ${schema}`);
  const held = await checkout(pool);
  const { client } = held;
  const applied: string[] = [];
  const lockKey = `migrate:${schema}`;
  const begin = async () => {
    await client.query(`BEGIN${transactionPrelude(pool)}`);
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKey]);
  };
  let failure: unknown;
  try {
    await begin();
    let done: Set<string>;
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      done = new Set((await client.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations`)).rows.map((r) => r.id));
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    for (const m of [...migrations].sort((a, b) => a.id.localeCompare(b.id))) {
      if (done.has(m.id)) continue;
      await begin();
      try {
        // Under the lock: another migrator may have applied it since this one started.
        const again = await client.query(`SELECT 1 FROM ${schema}.schema_migrations WHERE id = $1`, [m.id]);
        if (again.rowCount) {
          await client.query('COMMIT');
          continue;
        }
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
  } catch (err) {
    failure = err;
    throw err;
  } finally {
    held.release(failure);
  }
  return applied;
}

/**
 * SQLSTATEs of a database that cannot serve now, where a retry later may succeed: connection
 * exceptions (class 08), insufficient resources (53), an administrator's or a crash's shutdown and
 * "cannot connect now" (57P01–57P03), a statement cancelled (57014: a statement timeout, or a
 * pooler or failover cancelling it), and the transaction conflicts Postgres itself says to retry
 * (40001 serialization failure, 40P01 deadlock).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|53...|57P0[1-3]|57014|40001|40P01)$/;
/** Node's socket and DNS errors (the driver passes them on as they are). */
const UNAVAILABLE_NODE_CODE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);
const UNAVAILABLE_MESSAGE =
  /timeout|timed out|ECONNREFUSED|ECONNRESET|ENOTFOUND|EHOSTUNREACH|Connection terminated|connection.*closed|Client has encountered a connection error|not queryable|terminating connection/i;
/** Values Postgres cannot store in text (NUL bytes, bad encodings): the client's input, not a bug. */
const BAD_INPUT_SQLSTATE = new Set(['22021', '22P05']);

/**
 * True when an error means "the database is unreachable, overloaded or asks for a retry", not a
 * bug: by its SQLSTATE or Node error code, or by the driver's messages for a connection that
 * ended. The causes an error wraps (`cause`, an AggregateError's `errors`, e.g. one per address
 * of a host name) are looked at too.
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || err instanceof AppError || depth > 4) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (UNAVAILABLE_SQLSTATE.test(e.code) || UNAVAILABLE_NODE_CODE.has(e.code))) return true;
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message)) return true;
  if (isDatabaseUnavailable(e.cause, depth + 1)) return true;
  return Array.isArray(e.errors) && e.errors.some((inner) => isDatabaseUnavailable(inner, depth + 1));
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
