import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './process';

const run = promisify(execFile);
const BIN = `/usr/lib/postgresql/${process.env.PG_MAJOR ?? '15'}/bin`;

/**
 * A private, throw-away Postgres cluster for tests that stop, restart or cut Postgres (never the
 * shared one). Built with the installed initdb/pg_ctl, on a free loopback port, trust auth, fsync
 * off. initdb refuses to run as root, so as root the binaries run as the `postgres` OS user.
 */
export class PrivatePostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async start(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'fcd-pg-'));
    chmodSync(dir, 0o700);
    if (process.getuid?.() === 0) chownSync(dir, pgUid(), pgGid());
    const p = new PrivatePostgres(await freePort(), dir);
    await p.exec('initdb', ['-D', p.dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    await p.start();
    return p;
  }

  get dataDir(): string {
    return join(this.dir, 'data');
  }

  /** URL of a database on this cluster (default `postgres`). */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async createDatabase(name: string): Promise<string> {
    const c = new pg.Client({ connectionString: this.url() });
    await c.connect();
    try {
      await c.query(`CREATE DATABASE ${name}`);
    } finally {
      await c.end();
    }
    return this.url(name);
  }

  async start(): Promise<void> {
    const opts = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off`;
    await this.exec('pg_ctl', ['-D', this.dataDir, '-o', opts, '-l', join(this.dir, 'log'), '-w', '-t', '30', 'start']);
  }

  /** `pg_ctl stop -m fast`: every session is terminated, as in a managed-Postgres failover's first half. */
  async stopFast(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '30', 'stop']);
  }

  /** Stops the cluster (if running) and removes its files. */
  async destroy(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async exec(bin: string, args: string[]): Promise<void> {
    const asRoot = process.getuid?.() === 0;
    const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(BIN, bin), ...args]] : [join(BIN, bin), args];
    await run(cmd, argv, { cwd: this.dir });
  }
}

let ids: { uid: number; gid: number } | undefined;
function pgIds(): { uid: number; gid: number } {
  if (!ids) {
    ids = {
      uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
      gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
    };
  }
  return ids;
}
const pgUid = () => pgIds().uid;
const pgGid = () => pgIds().gid;
