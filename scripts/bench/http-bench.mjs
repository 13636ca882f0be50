// What the rounds of run.mjs share (the usage path, the proxied path, search by place, the import):
// starting a built service or a baseline process (with the node flags of its Helm values),
// autocannon with the same settings for every side and alternating rounds of two sides, a private
// database and the facility CLI on it, Pro accounts with keys made through the usage service's
// admin API, and the result file each round writes.
import { execFileSync, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { nodeOptionsOf } from '../../libs/testing/src/node-options.mjs';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
export const DURATION = Number(process.env.BENCH_DURATION ?? 8);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
export const KEYS = Number(process.env.BENCH_KEYS ?? 100);
export const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
export const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef0123';
export const INTERNAL_AUTH_SECRET = 'bench-internal-secret-0123456789abcdef';
/** Shared by the gateway and the usage service (their gRPC calls). */
const USAGE_GRPC_SECRET = 'bench-usage-grpc-secret-0123456789abcdef';
/** Every process started by `start`, killed by `stopAll`. */
const children = [];

/**
 * Starts `script` with `env` (and the node flags of `service` in the Helm values, when given);
 * resolves with its `ready` log line plus its `pid` once it has logged it.
 */
export function start(script, env, service) {
  return new Promise((resolveReady, reject) => {
    // BENCH_PROFILE_DIR: every service writes a V8 CPU profile there when it exits (chrome://inspect, speedscope).
    const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
    const flags = service ? nodeOptionsOf(service) : [];
    const child = spawn(process.execPath, [...flags, ...profile, script], {
      env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      for (const line of buf.split('\n')) {
        try {
          const l = JSON.parse(line);
          if (l.msg === 'ready') resolveReady({ ...l, pid: child.pid });
        } catch {}
      }
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

/** Stops every process `start` started (SIGTERM, or SIGKILL when `hard`). */
export async function stopAll(hard = false) {
  for (const c of children.splice(0)) c.kill(hard ? 'SIGKILL' : 'SIGTERM');
  if (!hard) await new Promise((r) => setTimeout(r, 500));
}

/** One autocannon run of GET `url`, the headers of the i-th request from `headersFor(i)`. */
export function measure(url, headersFor) {
  return new Promise((res, rej) => {
    let i = 0;
    // Ctrl-C ends the run in hand; removed when it ends, so the runs of a bench do not pile listeners up.
    let inst;
    const stop = () => inst?.stop();
    process.once('SIGINT', stop);
    inst = autocannon(
      {
        url,
        connections: CONNECTIONS,
        duration: DURATION,
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, headers: { ...req.headers, ...headersFor(i++) } }) }],
      },
      (err, result) => {
        process.removeListener('SIGINT', stop);
        if (err) rej(err);
        else res(result);
      },
    );
  });
}

export const summary = (name, r) => ({
  name,
  requestsPerSecond: Math.round(r.requests.average),
  latencyP50Ms: r.latency.p50,
  latencyP99Ms: r.latency.p99,
  non2xx: r.non2xx,
  errors: r.errors,
  timeouts: r.timeouts,
});

/** The round of median ratio. */
export const medianRound = (rounds) => [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(rounds.length / 2)];

/**
 * One warm-up run of each side (connections, JIT), then ROUNDS rounds of the two sides measured in
 * turn, so a drift in the machine's speed hits both. `sides`
 * maps each side's key, the baseline first, to its `{ name, url, headers }` (`headers(i)`: the i-th
 * request's headers), `meters` each key to a cpuMeter (cpu.mjs) open over that side's runs only.
 * A round is `{ round, <baseline>, <other>, ratio }`: each side's summary and the other's req/s over
 * the baseline's. Resolves with every round and the requests each side made.
 */
export async function alternatingRounds(sides, meters) {
  const [baseline, other] = Object.keys(sides);
  const all = [];
  const requests = { [baseline]: 0, [other]: 0 };
  for (const side of [baseline, other]) await measure(sides[side].url, sides[side].headers);
  for (let r = 0; r < ROUNDS; r++) {
    const row = { round: r + 1 };
    for (const side of [baseline, other]) {
      const w = meters[side].open();
      const raw = await measure(sides[side].url, sides[side].headers);
      meters[side].close(w);
      requests[side] += raw.requests.total;
      row[side] = summary(sides[side].name, raw);
    }
    row.ratio = Number((row[other].requestsPerSecond / row[baseline].requestsPerSecond).toFixed(3));
    all.push(row);
    const rate = (side) => `${side} ${row[side].requestsPerSecond} req/s`;
    console.log(`round ${r + 1}: ${rate(baseline)}, ${rate(other)}, ratio ${row.ratio}`);
  }
  return { all, requests };
}

export const machine = () => ({ cpus: cpus().length, model: cpus()[0]?.model, node: process.version });

/** Reads unlabelled-or-default-labelled series off a service's /metrics. */
export async function scrape(metricsPort) {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return (name) => Number(new RegExp(`^${name}(?:{[^}]*})? (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

/** The usage service's mean items per authorization batch so far (its cost is mostly per batch). */
export async function meanBatchSize(usage) {
  const metric = await scrape(usage.metricsPort);
  return Number((metric('fcd_authorize_batch_size_sum') / metric('fcd_authorize_batch_size_count')).toFixed(1));
}

/** Writes a round's result to bench-results/<name>-<date>.json, where targets.mjs reads it. */
export function writeResult(name, result) {
  mkdirSync(resolve(root, 'bench-results'), { recursive: true });
  writeFileSync(resolve(root, `bench-results/${name}-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);
}

/** Creates a private database named after `name`; resolves with its URL and `drop()`. */
export async function benchDatabase(name) {
  const dbName = `bench_${name}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: DB_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(DB_URL);
  url.pathname = `/${dbName}`;
  async function drop() {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
  return { name: dbName, url: url.toString(), drop };
}

/**
 * The built facility CLI on `db` (LOG_LEVEL warn): runs `args` to the end and returns its stdout.
 * Throws when it exits non-zero.
 */
export function facilityCli(db) {
  const cli = resolve(root, 'services/facility/dist/cli.js');
  const env = { PATH: process.env.PATH, DATABASE_URL: db.url, LOG_LEVEL: 'warn' };
  return (args) => execFileSync(process.execPath, [cli, ...args], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** Migrates the facility schema of `db` and fills it with `count` demo facilities of `seed`. */
export function seedFacilities(db, count, seed) {
  const facility = facilityCli(db);
  facility(['migrate']);
  facility(['seed', '--facilities', String(count), '--seed', seed, '--json']);
}

/** Starts the built usage service on `db` (its Redis keys under the database's name). */
export function startUsage(db) {
  return start(
    resolve(root, 'services/usage/dist/main.js'),
    {
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_KEY_PREFIX: `${db.name}:`,
      GRPC_PORT: '0',
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      ADMIN_TOKEN,
      USAGE_GRPC_SECRET,
    },
    'usage',
  );
}

/** Starts the built facility service on `db` (its outbox relay off: the reads alone are measured). */
export function startFacility(db) {
  return start(
    resolve(root, 'services/facility/dist/main.js'),
    {
      DATABASE_URL: db.url,
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      INTERNAL_AUTH_SECRET,
      INGEST_TOKEN: 'bench-ingest-token-0123456789abcdef0123',
      RELAY_ENABLED: 'false',
      NATS_URL,
    },
    'facility',
  );
}

/** Starts the built gateway in front of `usage` (and the facility service at `facilityUrl`, when given). */
export function startGateway(db, usage, facilityUrl) {
  return start(
    resolve(root, 'services/gateway/dist/main.js'),
    {
      USAGE_GRPC_ADDRESS: `127.0.0.1:${usage.grpcPort}`,
      ...(facilityUrl ? { FACILITY_URL: facilityUrl } : {}),
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      INTERNAL_AUTH_SECRET,
      USAGE_GRPC_SECRET,
      REDIS_URL,
      REDIS_KEY_PREFIX: `${db.name}:`,
    },
    'gateway',
  );
}

/** KEYS Pro accounts with one API key each, made through the usage service's admin API. */
export async function createProKeys(usage) {
  const adminUrl = `http://127.0.0.1:${usage.port}/admin/v1`;
  const auth = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const keys = [];
  for (let i = 0; i < KEYS; i++) {
    const acct = await (
      await fetch(`${adminUrl}/accounts`, { method: 'POST', headers: auth, body: JSON.stringify({ name: `bench ${i}`, tier: 'pro' }) })
    ).json();
    const key = await (
      await fetch(`${adminUrl}/accounts/${acct.data.id}/keys`, { method: 'POST', headers: { authorization: auth.authorization } })
    ).json();
    keys.push(key.data.api_key);
  }
  return keys;
}

/**
 * The gateway's signed x-fcd-account header for one GET of `path` by a Pro account
 * (libs/service-kit/src/internal-auth.ts), valid 5 s: what a client of the facility service
 * without the gateway sends.
 */
export function signAccount(path) {
  const claims = { account_id: 'acct_bench', tier: 'pro', tier_rank: 1, request_id: 'req_bench', aud: 'facility', m: 'GET', p: path };
  const payload = Buffer.from(JSON.stringify({ ...claims, exp: Date.now() + 5000 })).toString('base64url');
  return `${payload}.${createHmac('sha256', Buffer.from(INTERNAL_AUTH_SECRET)).update(payload).digest('base64url')}`;
}
