import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { eventually } from './eventually';
import { freePort, repoRoot } from './process';
import { createTestDatabase, type TestDatabase, testUrls } from './services';

/**
 * A private PgBouncer in transaction pooling mode in front of the test Postgres (ADR 0013): its
 * own port, ini and auth file in a temp dir, `pool_mode = transaction`, and a server pool of
 * `poolSize` connections per database and user, small, so every service's clients share a few
 * server connections (a session SET, a session advisory lock or a named prepared statement would
 * leak to, or be missing on, another client's transaction). It accepts only the startup parameters
 * PgBouncer accepts by default (no `ignore_startup_parameters`): a client sending `options` or
 * `statement_timeout` is refused, as in production.
 */
export interface PgBouncer {
  port: number;
  /** Server connections per database and user. */
  poolSize: number;
  /** The URL of a database through PgBouncer (the same name on the Postgres behind it). */
  url(database: string): string;
  /** Runs a command of the admin console (`SHOW POOLS`, `SHOW STATS`…) and returns its rows. */
  admin<T = Record<string, unknown>>(command: string): Promise<T[]>;
  /** Everything PgBouncer logged (its own stderr). */
  output: string[];
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  poolSize?: number;
  maxClientConn?: number;
}

/** The pgbouncer binary, installed by scripts/debian-tool.sh (Debian's package) when missing. */
function pgbouncerBinary(): string {
  const find = () => ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'].find((p) => existsSync(p));
  let bin = find();
  if (!bin) {
    spawnSync('bash', [resolve(repoRoot, 'scripts/debian-tool.sh'), 'pgbouncer', 'pgbouncer'], { stdio: 'inherit' });
    bin = find();
  }
  if (!bin) throw new Error('pgbouncer is not installed and scripts/debian-tool.sh could not install it');
  return bin;
}

export async function startPgBouncer(options: PgBouncerOptions = {}): Promise<PgBouncer> {
  const bin = pgbouncerBinary();
  const upstream = new URL(testUrls.database);
  const user = decodeURIComponent(upstream.username || 'postgres');
  const poolSize = options.poolSize ?? 3;
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fcd-pgbouncer-'));
  // PgBouncer refuses to run as root: it then drops to `nobody`, who must read its files.
  chmodSync(dir, 0o755);
  const ini = join(dir, 'pgbouncer.ini');
  const auth = join(dir, 'userlist.txt');
  writeFileSync(auth, `"${user}" ""\n`, { mode: 0o644 });
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${upstream.hostname} port=${upstream.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${auth}`,
      `admin_users = ${user}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'min_pool_size = 0',
      'reserve_pool_size = 0',
      `max_client_conn = ${options.maxClientConn ?? 300}`,
      'query_wait_timeout = 30',
      'server_check_delay = 0',
      'logfile =',
      'pidfile =',
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const args = process.getuid?.() === 0 ? ['-u', 'nobody', ini] : [ini];
  const proc: ChildProcess = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  const collect = (chunk: Buffer) => output.push(...chunk.toString('utf8').split('\n').filter(Boolean));
  proc.stdout?.on('data', collect);
  proc.stderr?.on('data', collect);
  const exited = new Promise<number | null>((res) => proc.once('exit', (code) => res(code)));
  const url = (database: string) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`;
  const admin = async <T>(command: string): Promise<T[]> => {
    const c = new pg.Client({ connectionString: url('pgbouncer') });
    await c.connect();
    try {
      return (await c.query(command)).rows as T[];
    } finally {
      await c.end().catch(() => undefined);
    }
  };
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGINT');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await eventually(
      () =>
        admin('SHOW VERSION').then(
          () => true,
          () => proc.exitCode !== null,
        ),
      (ok) => ok,
      10_000,
    );
    if (proc.exitCode !== null) throw new Error(`pgbouncer exited: ${output.join('\n')}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return { port, poolSize, url, admin, output, stop };
}

/**
 * A fresh database on the test Postgres, reached through `bouncer`: its `url` is PgBouncer's,
 * its `env` tells services and CLIs so (DATABASE_POOL_MODE=transaction); drop() goes to Postgres.
 */
export async function createPooledTestDatabase(label: string, bouncer: PgBouncer): Promise<TestDatabase> {
  const db = await createTestDatabase(label);
  return { ...db, url: bouncer.url(db.name), env: { DATABASE_POOL_MODE: 'transaction' } };
}
