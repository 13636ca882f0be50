#!/usr/bin/env node
// npm run bench — throughput of the metered hot path against the machine's ceiling.
//
// 1. A bare Fastify process answering GET /v1/account/usage with a JSON body of
//    the same size as the real one (the ceiling of this machine).
// 2. The real path: gateway → usage (gRPC batch stream) → Redis, with 100 Pro keys
//    used round-robin, GET /v1/account/usage.
// Both measured with autocannon in the same run (50 connections by default), in alternating
// rounds (BENCH_ROUNDS, default 3, of BENCH_DURATION s); prints requests/s, p50/p99 latency and
// the median round's ratio, the mean authorization batch size, and writes bench-results/usage-<date>.json.
// Then runs scripts/bench/delivery.mjs, scripts/bench/paced.mjs, scripts/bench/fairness.mjs,
// scripts/bench/import.mjs, scripts/bench/geo.mjs and scripts/bench/echo.mjs
// (BENCH_ONLY=usage,delivery,paced,fairness,import,geo,echo chooses).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const KEYS = Number(process.env.BENCH_KEYS ?? 100);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef0123';
const children = [];

function start(script, env) {
  return new Promise((resolvePort, reject) => {
    // BENCH_PROFILE_DIR: every service writes a V8 CPU profile there when it exits (chrome://inspect, speedscope).
    const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
    const child = spawn(process.execPath, [...profile, script], {
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
          if (l.msg === 'ready') resolvePort(l);
        } catch {}
      }
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

function measure(url, headersFor) {
  return new Promise((res, rej) => {
    let i = 0;
    const inst = autocannon(
      {
        url,
        connections: CONNECTIONS,
        duration: DURATION,
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, headers: { ...req.headers, ...headersFor(i++) } }) }],
      },
      (err, result) => (err ? rej(err) : res(result)),
    );
    process.once('SIGINT', () => inst.stop());
  });
}

const summary = (name, r) => ({
  name,
  requestsPerSecond: Math.round(r.requests.average),
  latencyP50Ms: r.latency.p50,
  latencyP99Ms: r.latency.p99,
  non2xx: r.non2xx,
  errors: r.errors,
  timeouts: r.timeouts,
});

/** Reads unlabelled-or-default-labelled series off a service's /metrics. */
async function scrape(metricsPort) {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return (name) => Number(new RegExp(`^${name}(?:{[^}]*})? (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

async function main() {
  const dbName = `bench_${Date.now()}`;
  const admin = new pg.Client({ connectionString: DB_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrl = new URL(DB_URL);
  dbUrl.pathname = `/${dbName}`;

  try {
    const usage = await start(resolve(root, 'services/usage/dist/main.js'), {
      DATABASE_URL: dbUrl.toString(),
      REDIS_URL,
      REDIS_KEY_PREFIX: `${dbName}:`,
      GRPC_PORT: '0',
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      ADMIN_TOKEN,
    });
    const gateway = await start(resolve(root, 'services/gateway/dist/main.js'), {
      USAGE_GRPC_ADDRESS: `127.0.0.1:${usage.grpcPort}`,
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      INTERNAL_AUTH_SECRET: 'bench-internal-secret-0123456789abcdef',
      REDIS_URL,
      REDIS_KEY_PREFIX: `${dbName}:`,
    });
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
    const gatewayUrl = `http://127.0.0.1:${gateway.port}/v1/account/usage`;
    const sample = await fetch(gatewayUrl, { headers: { 'x-api-key': keys[0] } });
    const bodySize = (await sample.text()).length;
    const bare = await start(resolve(root, 'scripts/bench/bare-server.mjs'), { BODY_SIZE: String(bodySize) });
    const bareUrl = `http://127.0.0.1:${bare.port}/v1/account/usage`;

    console.log(`warming up (${CONNECTIONS} connections)…`);
    const meteredHeaders = (i) => ({ 'x-api-key': keys[i % keys.length] });
    await measure(bareUrl, () => ({}));
    await measure(gatewayUrl, meteredHeaders);
    // Rounds alternate baseline and metered, so a drift in the machine's speed (this VM's bare
    // Fastify swings 12–28 k req/s between runs) hits both sides; the median round ratio is reported.
    const rounds = [];
    let meteredRequests = 0;
    const cpuBefore = { gateway: (await scrape(gateway.metricsPort))('process_cpu_seconds_total'), usage: 0 };
    cpuBefore.usage = (await scrape(usage.metricsPort))('process_cpu_seconds_total');
    for (let r = 0; r < ROUNDS; r++) {
      const b = summary('bare fastify (ceiling)', await measure(bareUrl, () => ({})));
      const raw = await measure(gatewayUrl, meteredHeaders);
      meteredRequests += raw.requests.total;
      const m = summary('gateway → usage → redis', raw);
      rounds.push({ round: r + 1, baseline: b, metered: m, ratio: Number((m.requestsPerSecond / b.requestsPerSecond).toFixed(3)) });
      console.log(`round ${r + 1}: bare ${b.requestsPerSecond} req/s, metered ${m.requestsPerSecond} req/s, ratio ${rounds[r].ratio}`);
    }
    const median = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(rounds.length / 2)];
    const { baseline, metered, ratio } = median;
    // CPU per metered request of each service (process_cpu_seconds_total over the metered rounds):
    // unlike req/s, barely moved by the machine's speed swings, so it shows what a change saved.
    const usageMetrics = await scrape(usage.metricsPort);
    const gatewayMetrics = await scrape(gateway.metricsPort);
    const perRequestUs = (after, before) => Math.round(((after - before) * 1e6) / meteredRequests);
    const efficiency = {
      gatewayCpuUsPerRequest: perRequestUs(gatewayMetrics('process_cpu_seconds_total'), cpuBefore.gateway),
      usageCpuUsPerRequest: perRequestUs(usageMetrics('process_cpu_seconds_total'), cpuBefore.usage),
      meanBatchSize: Number((usageMetrics('fcd_authorize_batch_size_sum') / usageMetrics('fcd_authorize_batch_size_count')).toFixed(1)),
    };
    const result = {
      date: new Date().toISOString(),
      machine: { cpus: (await import('node:os')).cpus().length, model: (await import('node:os')).cpus()[0]?.model, node: process.version },
      connections: CONNECTIONS,
      durationSeconds: DURATION,
      keys: KEYS,
      bodyBytes: bodySize,
      baseline,
      metered,
      ratio,
      efficiency,
      rounds,
    };
    console.table([baseline, metered]);
    console.log(
      `CPU per metered request: gateway ${efficiency.gatewayCpuUsPerRequest} µs, usage ${efficiency.usageCpuUsPerRequest} µs; mean batch ${efficiency.meanBatchSize}`,
    );
    console.log(`ratio metered/baseline (median of ${ROUNDS} rounds, shown above): ${ratio} (target ≥ 0.4)`);
    mkdirSync(resolve(root, 'bench-results'), { recursive: true });
    writeFileSync(resolve(root, `bench-results/usage-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

/** BENCH_ONLY: a comma-separated choice of usage, delivery, paced, fairness, import, geo, echo (default: all seven). */
async function all() {
  const only = new Set((process.env.BENCH_ONLY ?? 'usage,delivery,paced,fairness,import,geo,echo').split(','));
  execFileSync('bash', [resolve(root, 'scripts/services.sh')], { stdio: 'inherit' });
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
  if (only.has('usage')) await main();
  // The delivery benchmark (events → dispatcher → receiver, beside a bare undici loop).
  const backlog = resolve(tmpdir(), `fcd-bench-delivery-${process.pid}.json`);
  if (only.has('delivery')) {
    execFileSync(process.execPath, [resolve(root, 'scripts/bench/delivery.mjs')], {
      stdio: 'inherit',
      env: { ...process.env, BENCH_DELIVERY_RESULT: backlog },
    });
  }
  // The paced delivery benchmark (issue 16: facility ingestion → outbox relay → JetStream → dispatcher →
  // receiver at 900 deliveries/s, then at 80 % of the backlog run's deliveries/s when it ran just before).
  if (only.has('paced')) {
    const capacity = existsSync(backlog) ? JSON.parse(readFileSync(backlog, 'utf8')).dispatcher.deliveries_per_s : undefined;
    execFileSync(process.execPath, [resolve(root, 'scripts/bench/paced.mjs')], {
      stdio: 'inherit',
      env: { ...process.env, ...(capacity ? { BENCH_PACED_CAPACITY: String(capacity) } : {}) },
    });
  }
  rmSync(backlog, { force: true });
  // The fairness benchmark (issue 19: fresh events for one subscription while another, rate-limited to
  // 20/s, holds a 10,000-delivery backlog; beside the same stream with no backlog).
  if (only.has('fairness')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/fairness.mjs')], { stdio: 'inherit' });
  // The import benchmark (facility CLI, 50,000 rows, twice, beside COPY of the same lines).
  if (only.has('import')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/import.mjs')], { stdio: 'inherit' });
  // The geo-query benchmark (search by place beside the plain state list, facility service).
  if (only.has('geo')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/geo.mjs')], { stdio: 'inherit' });
  // The ECHO sync benchmark (sync-echo of 1,000,000 facilities and 2,000,000 violations, a no-change
  // re-sync, beside psql \copy of the same files; BENCH_ECHO_FACILITIES changes the size).
  if (only.has('echo')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/echo.mjs')], { stdio: 'inherit' });
}

all().catch((err) => {
  console.error(err);
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
});
