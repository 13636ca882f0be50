import { isDatabaseUnavailable, type Pool, serviceUnavailable } from '@fcd/service-kit';
import type { Queryable } from './queries';

/** Rethrows an outage as 503 SERVICE_UNAVAILABLE (Retry-After set); anything else unchanged. */
export function mapDbError(err: unknown): never {
  if (isDatabaseUnavailable(err)) throw serviceUnavailable('postgres', 1, err);
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

/**
 * Where the facility pool finds its schema: in the connection string (search_path startup option)
 * when it talks to Postgres directly, or with SET LOCAL search_path in every transaction under
 * PgBouncer transaction pooling, which refuses startup options (createPool's searchPath; ADR 0013).
 */
export function schemaPoolTarget(url: string, poolMode?: 'session' | 'transaction'): { connectionString: string; searchPath?: string } {
  return poolMode === 'transaction' ? { connectionString: url, searchPath: SCHEMA } : { connectionString: schemaConnectionString(url) };
}

/** The connection string with search_path set to the service's schema, so SQL names its tables unqualified. */
export function schemaConnectionString(url: string, schema = SCHEMA): string {
  const u = new URL(url);
  const existing = u.searchParams.get('options');
  u.searchParams.set('options', `${existing ? `${existing} ` : ''}-c search_path=${schema}`);
  return u.toString();
}
