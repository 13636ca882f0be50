import { type Logger, postgresOptions } from '@fcd/service-kit';
import pg from 'pg';
import type { CliConfig } from '../config';

const SYNC_LOCK_KEY = 'facility:echo-sync';

/** Another sync holds the lock: this one changed nothing. */
class SyncBusyError extends Error {}

export interface SyncLock {
  ensure(): Promise<void>;
  release(): Promise<void>;
}

/**
 * The one-sync-at-a-time lock: a transaction-scoped advisory lock in a transaction kept open on a
 * connection of its own (so it also holds through PgBouncer in transaction pooling mode, where a
 * session lock would stay on whichever server connection the pooler picked), re-taken after it is
 * lost. The transaction reads and writes nothing, so it holds back no vacuum.
 */
export function syncLock(config: CliConfig, logger: Logger): SyncLock {
  let held: pg.Client | undefined;
  let lost = false;
  return {
    async ensure() {
      if (held && !lost) return;
      held?.end().catch(() => undefined);
      held = undefined;
      const { poolMode: _, ...connection } = postgresOptions(config);
      const client = new pg.Client({
        connectionString: config.DATABASE_URL,
        application_name: 'facility-sync-echo-lock',
        connectionTimeoutMillis: 5000,
        ...connection,
      });
      client.on('error', (err) => {
        lost = true;
        logger.warn({ err: { message: err.message } }, 'sync lock connection lost');
      });
      client.on('end', () => {
        lost = true;
      });
      await client.connect();
      // Idle in this transaction for the whole sync: a server-wide idle_in_transaction_session_timeout must not end it.
      await client.query('BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0');
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [SYNC_LOCK_KEY]);
      if (!rows[0]?.ok) {
        await client.end().catch(() => undefined);
        throw new SyncBusyError('another ECHO sync is running (its lock is held); this one changed nothing');
      }
      held = client;
      lost = false;
    },
    async release() {
      await held?.query('ROLLBACK').catch(() => undefined);
      await held?.end().catch(() => undefined);
      held = undefined;
    },
  };
}
