import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { testUrls, uniqueName } from '@fcd/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `npm run up` (scripts/up.sh) as a newcomer runs it: twice in a row, and once more while the last
 * run still serves. After each "The API is up", the first request answers 200 at once. The runs use
 * their own database, run directory, ports (FCD_PORT_OFFSET), Redis key prefix and NATS stream, and
 * the services already built (--no-build), so they disturb neither other tests nor a developer's own
 * `npm run up`.
 */
const root = resolve(import.meta.dirname, '..');
const name = `t_${uniqueName('up')}`;
const runDir = mkdtempSync(join(tmpdir(), 'fcd-up-'));
const env = {
  ...process.env,
  FCD_RUN_DIR: runDir,
  FCD_DB_NAME: name,
  REDIS_KEY_PREFIX: `${name}:`,
  EVENTS_STREAM: name.toUpperCase(),
  EVENTS_SUBJECT_PREFIX: name,
  NPM_CONFIG_UPDATE_NOTIFIER: 'false',
};

/** The ports up.sh uses before its offset is added. */
const BASE_PORTS = [8080, 8081, 8082, 8083, 8090, 50051, 9463, 9464, 9465, 9466, 9467];

function canListen(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

/**
 * An offset that puts the HTTP ports at 10,080–19,467: below the ports `freePort` gives other test
 * files (20,000+) and Linux's ephemeral range, and away from a developer's own `npm run up`.
 */
async function freeOffset(): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const offset = 2000 + Math.floor(Math.random() * 8000);
    const free = await Promise.all(BASE_PORTS.map((p) => canListen(p + offset)));
    if (free.every(Boolean)) return offset;
  }
  throw new Error('no offset with every port of npm run up free');
}

interface UpRun {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

const runs: UpRun[] = [];

function startUp(offset: number): UpRun {
  const child = spawn('bash', ['scripts/up.sh', '--no-build'], {
    cwd: root,
    env: { ...env, FCD_PORT_OFFSET: String(offset) },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (b: Buffer) => {
    text += b.toString();
  });
  child.stderr?.on('data', (b: Buffer) => {
    text += b.toString();
  });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const run = { child, output: () => text, exited };
  runs.push(run);
  return run;
}

/** Resolves with the Pro key once the run prints "The API is up"; rejects if it exits first. */
async function apiUp(run: UpRun, timeoutMs = 120_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let exitCode: number | null | undefined;
  void run.exited.then((c) => {
    exitCode = c;
  });
  while (!run.output().includes('The API is up')) {
    if (exitCode !== undefined) throw new Error(`npm run up exited (${exitCode}) before the API was up:\n${run.output()}`);
    if (Date.now() > deadline) throw new Error(`npm run up did not finish within ${timeoutMs} ms:\n${run.output()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const key = /^\s+pro\s+(fcd_\S+)/m.exec(run.output())?.[1];
  if (key === undefined) throw new Error(`no Pro key in the output:\n${run.output()}`);
  return key;
}

async function stop(run: UpRun): Promise<number | null> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
  return run.exited;
}

async function usage(offset: number, key: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${8080 + offset}/v1/account/usage`, { headers: { 'x-api-key': key } });
  return { status: res.status, body: await res.json() };
}

afterAll(async () => {
  for (const run of runs) {
    await stop(run);
    // Anything the run left (it should leave nothing): its whole process group.
    try {
      process.kill(-(run.child.pid as number), 'SIGKILL');
    } catch {}
  }
  const admin = new pg.Client({ connectionString: testUrls.database });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => admin.end());
  const nc = await connect({ servers: testUrls.nats });
  await (await jetstreamManager(nc)).streams.delete(env.EVENTS_STREAM).catch(() => false);
  await nc.close();
  await redisDeletePrefix(env.REDIS_KEY_PREFIX);
  rmSync(runDir, { recursive: true, force: true });
}, 60_000);

async function redisDeletePrefix(prefix: string): Promise<void> {
  const run = promisify(execFile);
  const { stdout } = await run('redis-cli', ['-u', testUrls.redis, '--scan', '--pattern', `${prefix}*`]);
  const keys = stdout.split('\n').filter((k) => k !== '');
  if (keys.length > 0) await run('redis-cli', ['-u', testUrls.redis, 'DEL', ...keys]);
}

/** The pids of the processes a run started (children of its up.sh). */
function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

describe('npm run up', () => {
  it('answers the first request after "The API is up" with 200, twice in a row and when it replaces a running up', async () => {
    const offset = await freeOffset();

    const first = startUp(offset);
    const firstKey = await apiUp(first);
    expect((await usage(offset, firstKey)).status).toBe(200);
    expect(await stop(first)).toBe(143);
    expect(first.output()).toContain('stopping…');

    // The second run finds the first's logs saying "ready"; it must wait for its own services.
    const second = startUp(offset);
    const secondKey = await apiUp(second);
    const answer = await usage(offset, secondKey);
    expect(answer).toMatchObject({ status: 200, body: { data: { tier: 'pro', today: { request_count: 1 } } } });
    const secondServices = childrenOf(second.child.pid as number);
    expect(secondServices.length).toBeGreaterThanOrEqual(5);

    // A third run while the second still serves stops the second (and its services) first.
    const third = startUp(offset);
    const thirdKey = await apiUp(third);
    expect(third.output()).toContain(`stopping the earlier npm run up (pid ${second.child.pid})`);
    expect(await second.exited).toBe(143);
    for (const pid of secondServices) expect(() => process.kill(pid, 0)).toThrow();
    const again = await usage(offset, thirdKey);
    expect(again).toMatchObject({ status: 200, body: { data: { tier: 'pro', today: { request_count: 1 } } } });

    await stop(third);
    expect(await canListen(8080 + offset)).toBe(true);
  }, 420_000);
});
