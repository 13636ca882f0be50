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

/** The connection string with search_path set to the service's schema, so SQL names its tables unqualified. */
export function schemaConnectionString(url: string, schema = SCHEMA): string {
  const u = new URL(url);
  const existing = u.searchParams.get('options');
  u.searchParams.set('options', `${existing ? `${existing} ` : ''}-c search_path=${schema}`);
  return u.toString();
}
