import { describe, expect, it } from 'vitest';
import { listenConnection } from './listener';

const base = { OUTBOX_LISTEN: true, DATABASE_URL: 'postgres://app@pgbouncer:6432/fcd', PG_CONNECT_TIMEOUT_MS: 2000 };

describe('where the outbox listener connects', () => {
  it('uses DATABASE_URL, with its password and TLS, when it is a session connection', () => {
    expect(listenConnection(base, { password: 'pw', ssl: { rejectUnauthorized: true } })).toEqual({
      connectionString: 'postgres://app@pgbouncer:6432/fcd',
      password: 'pw',
      ssl: { rejectUnauthorized: true },
      connectionTimeoutMillis: 2000,
      application_name: 'facility-outbox-listen',
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
  });

  it('does not LISTEN through a transaction pooler: polls only, unless given a direct URL', () => {
    expect(listenConnection(base, { poolMode: 'transaction' })).toBeUndefined();
    expect(
      listenConnection(
        { ...base, OUTBOX_LISTEN_DATABASE_URL: 'postgres://app@postgres:5432/fcd' },
        { poolMode: 'transaction', password: 'pw' },
      ),
    ).toMatchObject({ connectionString: 'postgres://app@postgres:5432/fcd', password: 'pw' });
  });

  it('is off with OUTBOX_LISTEN=false', () => {
    expect(listenConnection({ ...base, OUTBOX_LISTEN: false }, {})).toBeUndefined();
  });
});
