import { execFile, execFileSync, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { createLogger, createPool, type Pool } from '@fcd/service-kit';
import { PrivatePostgres, repoRoot } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaConnectionString } from '../src/store/db';

const run = promisify(execFile);

/**
 * The built facility CLI against a private Postgres cluster that the test
 * stops: `simulate` retries a lost connection with backoff (--retry-for) and
 * finishes; with a short --retry-for it fails with one clear line.
 */
const DB = 'facility_cli_faults';
let pgs: PrivatePostgres;
let pool: Pool;
const cli = resolve(repoRoot, 'services/facility/dist/cli.js');
const env = (extra: Record<string, string> = {}) => ({ PATH: process.env.PATH ?? '', DATABASE_URL: pgs.url(DB), ...extra });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  execFileSync('npm', ['run', 'build', '-w', '@fcd/facility'], { cwd: repoRoot, stdio: 'ignore' });
  pgs = await PrivatePostgres.start();
  await pgs.createDatabase(DB);
  await run(process.execPath, [cli, 'seed', '--facilities', '20', '--seed', 'faults'], { env: env() });
  pool = createPool({
    connectionString: schemaConnectionString(pgs.url(DB)),
    applicationName: 'test',
    logger: createLogger({ service: 't', level: 'silent' }),
  });
}, 120_000);

afterAll(async () => {
  await pool?.end().catch(() => undefined);
  await pgs?.destroy();
});

function start(args: string[], extraEnv: Record<string, string> = {}) {
  const proc = spawn(process.execPath, [cli, ...args], { env: env(extraEnv), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((res) =>
    proc.once('exit', (code) => res({ code, stdout, stderr })),
  );
  return { proc, exited, stderr: () => stderr };
}

describe('facility CLI through a Postgres outage', () => {
  it('simulate rides out a 10 s Postgres stop (retrying with backoff) and finishes; every change it counted is in the outbox', async () => {
    await pool.query('TRUNCATE outbox');
    const sim = start(['simulate', '--rate', '5', '--duration', '16', '--seed', 'ride-out', '--retry-for', '60s', '--json']);
    await sleep(2000);
    await pgs.stopFast();
    await sleep(10_000);
    await pgs.start();
    const { code, stdout, stderr } = await sim.exited;
    expect(code, stderr).toBe(0);
    expect(stderr).toContain('postgres unavailable; retrying');
    const summary = JSON.parse(stdout.trim()) as { steps: number; events: Record<string, number> };
    // It kept going after the outage (16 s at 5/s = 80 steps; the ones due during the stop ran after it).
    expect(summary.steps).toBe(80);
    const { rows } = await pool.query<{ type: string; n: number }>('SELECT type, count(*)::int AS n FROM outbox GROUP BY type');
    const stored = Object.fromEntries(rows.map((r) => [r.type, r.n]));
    expect(stored).toEqual(Object.fromEntries(Object.entries(summary.events).filter(([, n]) => n > 0)));
  }, 60_000);

  it('gives up after --retry-for with one clear line and exit code 1', async () => {
    await pgs.stopFast();
    try {
      const sim = start(['simulate', '--rate', '5', '--duration', '5', '--retry-for', '2s'], { LOG_LEVEL: 'error' });
      const { code, stderr } = await sim.exited;
      expect(code).toBe(1);
      const lines = stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^facility: Postgres unreachable: gave up after \d+ attempts in 2 s: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
      );
    } finally {
      await pgs.start();
    }
  }, 30_000);
});
