import { AppError, type Pool, serviceUnavailable } from '@fcd/service-kit';
import type { Queryable } from './queries';

const UNAVAILABLE_SQLSTATE = /^(08|53|57P0[1-3])/;
const UNAVAILABLE_MESSAGE =
  /timeout|ECONNREFUSED|ECONNRESET|ENOTFOUND|EHOSTUNREACH|Connection terminated|connection.*closed|Client has encountered a connection error/i;

/** True when a Postgres error means "the database is unreachable or overloaded", not a bug. */
export function isUnavailable(err: unknown): boolean {
  if (err instanceof AppError) return false;
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e.code === 'string' && UNAVAILABLE_SQLSTATE.test(e.code)) return true;
  return typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message);
}

/** Rethrows an outage as 503 SERVICE_UNAVAILABLE (Retry-After set); anything else unchanged. */
export function mapDbError(err: unknown): never {
  if (isUnavailable(err)) throw serviceUnavailable('postgres', 1, err);
  throw err;
}

/** A Queryable over the pool whose outages surface as SERVICE_UNAVAILABLE. */
export function guardedDb(pool: Pool): Queryable {
  return {
    async query(text, values) {
      try {
        return (await pool.query(text, values)) as never;
      } catch (err) {
        return mapDbError(err);
      }
    },
  };
}

export const SCHEMA = 'facility';

/** The connection string with search_path set to the service's schema, so SQL names its tables unqualified. */
export function schemaConnectionString(url: string, schema = SCHEMA): string {
  const u = new URL(url);
  const existing = u.searchParams.get('options');
  u.searchParams.set('options', `${existing ? `${existing} ` : ''}-c search_path=${schema}`);
  return u.toString();
}
