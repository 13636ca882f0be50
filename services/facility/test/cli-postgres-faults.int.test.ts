import { execFile, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { createLogger, createPool, type Pool } from '@fcd/service-kit';
import { PrivatePostgres, repoRoot } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaConnectionString } from '../src/store/db';
import { download1, writeDownload } from './echo-fixtures';
import { waitFor } from './helpers';

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
    // 30 s: after Postgres is back (about 12 s in), the retry's backoff (up to 5 s) and the catch-up
    // of the steps due meanwhile must fit in the run, also on a loaded CI machine.
    const sim = start(['simulate', '--rate', '5', '--duration', '30', '--seed', 'ride-out', '--retry-for', '60s', '--json']);
    await sleep(2000);
    await pgs.stopFast();
    await sleep(10_000);
    await pgs.start();
    const { code, stdout, stderr } = await sim.exited;
    expect(code, stderr).toBe(0);
    expect(stderr).toContain('postgres unavailable; retrying');
    const summary = JSON.parse(stdout.trim()) as { steps: number; events: Record<string, number> };
    // It kept going after the outage (30 s at 5/s = 150 steps; the ones due during the stop ran after it).
    expect(summary.steps).toBe(150);
    const { rows } = await pool.query<{ type: string; n: number }>('SELECT type, count(*)::int AS n FROM outbox GROUP BY type');
    const stored = Object.fromEntries(rows.map((r) => [r.type, r.n]));
    expect(stored).toEqual(Object.fromEntries(Object.entries(summary.events).filter(([, n]) => n > 0)));
  }, 60_000);

  it('sync-echo rides out a 10 s Postgres stop in the middle of a unit, re-applies that unit whole and finishes', async () => {
    await pool.query('TRUNCATE outbox');
    const download = await writeDownload(download1());
    // Hold the cases table so the stop lands while the sync is inside its last unit.
    const blocker = new pg.Client({ connectionString: schemaConnectionString(pgs.url(DB)) });
    blocker.on('error', () => undefined);
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE cases IN SHARE MODE');
    const sync = start(['sync-echo', '--from', download, '--retry-for', '60s', '--json']);
    await waitFor(
      async () => {
        const { rows } = await pool.query(
          "SELECT 1 FROM pg_stat_activity WHERE application_name = 'facility-cli' AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO cases%'",
        );
        return rows.length > 0 ? true : undefined;
      },
      30_000,
      'sync-echo to reach the cases unit',
    );
    await pgs.stopFast();
    await blocker.end().catch(() => undefined);
    await sleep(10_000);
    await pgs.start();
    const { code, stdout, stderr } = await sync.exited;
    expect(code, stderr).toBe(2);
    expect(stderr).toContain('postgres unavailable; retrying');
    const summary = JSON.parse(stdout.trim()) as { initial_load: boolean; events: Record<string, number> };
    expect(summary.initial_load).toBe(false);
    expect(summary.events).toEqual({ 'violation.new': 6, 'case.new': 2, 'case.updated': 0, 'facility.status_changed': 0 });
    const { rows } = await pool.query<{ type: string; n: number }>(
      'SELECT type, count(*)::int AS n FROM outbox GROUP BY type ORDER BY type',
    );
    expect(rows).toEqual([
      { type: 'case.new', n: 2 },
      { type: 'violation.new', n: 6 },
    ]);
    const cases = await pool.query<{ case_number: string }>(
      "SELECT case_number FROM cases WHERE case_number IN ('01-2023-0042', '06-2024-0311') ORDER BY 1",
    );
    expect(cases.rows.map((r) => r.case_number)).toEqual(['01-2023-0042', '06-2024-0311']);
  }, 90_000);

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
