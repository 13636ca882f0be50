import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './process';

const run = promisify(execFile);

/** The newest installed Postgres server binaries (`/usr/lib/postgresql/<version>/bin`). */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'pg_ctl')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error('no Postgres server binaries under /usr/lib/postgresql/<version>/bin');
  return join(root, versions[0] as string, 'bin');
}

/**
 * A private, throw-away Postgres cluster for tests that stop Postgres or cut
 * its connections (never the shared server). Trust auth, no fsync, on a free
 * port of 127.0.0.1. initdb refuses to run as root, so under root every
 * command runs as the `postgres` OS user on a directory it owns.
 */
export class PrivatePostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly bin: string,
  ) {}

  static async start(): Promise<PrivatePostgres> {
    const bin = postgresBinDir();
    const dir = mkdtempSync(join(tmpdir(), 'fcd-pg-'));
    chmodSync(dir, 0o700);
    if (isRoot()) {
      const { uid, gid } = await postgresUser();
      chownSync(dir, uid, gid);
    }
    const p = new PrivatePostgres(await freePort(), dir, bin);
    await p.exec('initdb', ['-D', p.dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
    await p.start();
    return p;
  }

  get dataDir(): string {
    return join(this.dir, 'data');
  }

  /** The connection URL of a database (default `postgres`) on this cluster. */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async start(): Promise<void> {
    const opts = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off`;
    await this.exec('pg_ctl', ['-D', this.dataDir, '-o', opts, '-l', join(this.dir, 'log'), '-w', '-t', '30', 'start']);
  }

  /** `pg_ctl stop -m fast`: every session is terminated and the server shuts down at once. */
  async stopFast(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '30', 'stop']);
  }

  /** Creates a database (no-op when it exists); returns its URL. */
  async createDatabase(name: string): Promise<string> {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name: ${name}`);
    await this.withAdmin(async (c) => {
      const { rowCount } = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (!rowCount) await c.query(`CREATE DATABASE ${name}`);
    });
    return this.url(name);
  }

  /**
   * Terminates every backend connected to a database (pg_terminate_backend),
   * which is how a failover looks to a client. Returns how many were ended.
   */
  async terminateBackends(database: string): Promise<number> {
    return this.withAdmin(async (c) => {
      const { rows } = await c.query<{ n: string }>(
        'SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [database],
      );
      return Number(rows[0]?.n ?? 0);
    });
  }

  /** Number of client backends connected to a database. */
  async backendCount(database: string): Promise<number> {
    return this.withAdmin(async (c) => {
      const { rows } = await c.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
        [database],
      );
      return Number(rows[0]?.n ?? 0);
    });
  }

  /** Stops the cluster (immediate) and removes its files. */
  async destroy(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async withAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client({ connectionString: this.url('postgres'), connectionTimeoutMillis: 5000 });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  private async exec(tool: string, args: string[]): Promise<void> {
    const path = join(this.bin, tool);
    const [cmd, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
    try {
      await run(cmd, argv, { timeout: 60_000 });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${tool} ${args.at(-1)} failed: ${e.stderr || e.message}`);
    }
  }
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}
