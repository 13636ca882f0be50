import { aborted, errMessage, type Logger, type Worker } from '@fcd/service-kit';
import pg from 'pg';

/** The channel the outbox's insert trigger notifies on commit (migration 0011_outbox_notify). */
export const OUTBOX_CHANNEL = 'fcd_outbox';

export interface ListenerSettings {
  /** A session connection: LISTEN does not survive PgBouncer's transaction pooling. */
  connection: pg.ClientConfig;
  logger: Pick<Logger, 'info' | 'warn'>;
  /** Called for every notification, and once after each (re)connect to catch up. */
  onCommit: () => void;
}

/**
 * Wakes the relay when any process commits outbox rows (the CLI's import, sync-echo, simulate,
 * another replica): one dedicated connection that LISTENs on the trigger's channel. The relay's
 * poll stays the fallback, so a lost connection delays events by a poll, never loses them; the
 * supervisor opens it again with the one backoff (docs/facility.md, "The outbox relay").
 */
export class OutboxListener implements Worker {
  readonly name = 'outbox listener';

  constructor(private readonly s: ListenerSettings) {}

  async run(signal: AbortSignal): Promise<void> {
    const client = new pg.Client(this.s.connection);
    const lost = new Promise<never>((_, reject) => {
      client.on('error', (err) => reject(err));
      client.on('end', () => reject(new Error('the LISTEN connection closed')));
    });
    lost.catch(() => undefined);
    client.on('notification', () => this.s.onCommit());
    try {
      await Promise.race([client.connect().then(() => client.query(`LISTEN ${OUTBOX_CHANNEL}`)), lost]);
      this.s.logger.info({ channel: OUTBOX_CHANNEL }, 'listening for outbox commits');
      // Rows committed while no one listened: the relay looks now rather than at its next poll.
      this.s.onCommit();
      await Promise.race([aborted(signal), lost]);
    } catch (err) {
      if (!signal.aborted) this.s.logger.warn({ err: { message: errMessage(err) } }, 'outbox LISTEN connection lost; polling meanwhile');
      throw err;
    } finally {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
    }
  }
}

/**
 * Where the listener connects, or undefined when it does not run: OUTBOX_LISTEN off, or
 * DATABASE_URL transaction-pooled with no OUTBOX_LISTEN_DATABASE_URL (then the relay polls only).
 */
export function listenConnection(
  config: { OUTBOX_LISTEN: boolean; OUTBOX_LISTEN_DATABASE_URL?: string | undefined; DATABASE_URL: string; PG_CONNECT_TIMEOUT_MS: number },
  connection: { password?: string; ssl?: pg.ClientConfig['ssl']; poolMode?: string },
): pg.ClientConfig | undefined {
  if (!config.OUTBOX_LISTEN) return undefined;
  const { poolMode, ...credentials } = connection;
  const url = config.OUTBOX_LISTEN_DATABASE_URL ?? (poolMode === 'transaction' ? undefined : config.DATABASE_URL);
  if (url === undefined) return undefined;
  return {
    connectionString: url,
    ...credentials,
    connectionTimeoutMillis: config.PG_CONNECT_TIMEOUT_MS,
    application_name: 'facility-outbox-listen',
    // An idle connection to a failed-over or cut-off server is noticed by TCP keepalive.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
}
