#!/usr/bin/env node
// Geo-query benchmark: the facility service answering a search by place
// (`near=<lat>,<lon>&radius_km=25`, GiST index on facility_point) beside the plain state list
// (`state=TX`, B-tree index), 25 rows a page, on BENCH_GEO_ROWS demo facilities (default 20,000).
// The facility service is called directly with the gateway's signed header (metering is measured
// by the usage benchmark). Rounds alternate the two queries; the facility's CPU µs per request of
// each query from /proc/<pid>/stat over its rounds. Writes bench-results/geo-<date>.json.
import { execFileSync } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { cpuMeter, usPerUnit } from './cpu.mjs';
import { start, stopAll } from './http-bench.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ROWS = Number(process.env.BENCH_GEO_ROWS ?? 20_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SECRET = 'bench-internal-secret-0123456789abcdef';
const dbName = `bench_geo_${randomBytes(4).toString('hex')}`;
const cli = resolve(root, 'services/facility/dist/cli.js');

/** The gateway's x-fcd-account header for one request (libs/service-kit/src/internal-auth.ts). */
function sign(path) {
  const claims = { account_id: 'acct_bench', tier: 'pro', tier_rank: 1, request_id: 'req_bench', aud: 'facility', m: 'GET', p: path };
  const payload = Buffer.from(JSON.stringify({ ...claims, exp: Date.now() + 5000 })).toString('base64url');
  return `${payload}.${createHmac('sha256', Buffer.from(SECRET)).update(payload).digest('base64url')}`;
}

function measure(base, path) {
  return new Promise((res, rej) => {
    autocannon(
      {
        url: `${base}${path}`,
        connections: CONNECTIONS,
        duration: DURATION,
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'x-fcd-account': sign(path) } }) }],
      },
      (err, r) => (err ? rej(err) : res(r)),
    );
  });
}

const summary = (name, r) => ({
  name,
  requestsPerSecond: Math.round(r.requests.average),
  latencyP50Ms: r.latency.p50,
  latencyP99Ms: r.latency.p99,
  non2xx: r.non2xx,
  errors: r.errors,
});

const admin = new pg.Client({ connectionString: DB_URL });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);
const url = new URL(DB_URL);
url.pathname = `/${dbName}`;
const env = { PATH: process.env.PATH, DATABASE_URL: url.toString(), LOG_LEVEL: 'warn' };
let pid;
try {
  execFileSync(process.execPath, [cli, 'migrate'], { env, stdio: 'ignore' });
  execFileSync(process.execPath, [cli, 'seed', '--facilities', String(ROWS), '--seed', 'bench-geo', '--json'], { env, stdio: 'ignore' });
  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  await db.query('ANALYZE facility.facilities');
  // The centre: a Texas facility (demo facilities cluster around real cities).
  const { rows } = await db.query(
    "SELECT latitude, longitude FROM facility.facilities WHERE state = 'TX' AND latitude IS NOT NULL ORDER BY registry_id LIMIT 1",
  );
  await db.end();
  const { latitude, longitude } = rows[0];
  const facility = await start(
    resolve(root, 'services/facility/dist/main.js'),
    {
      ...env,
      LOG_LEVEL: 'info',
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      INTERNAL_AUTH_SECRET: SECRET,
      INGEST_TOKEN: 'bench-ingest-token-0123456789abcdef0123',
      RELAY_ENABLED: 'false',
      NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    },
    'facility',
  );
  const port = facility.port;
  pid = facility.pid;
  const base = `http://127.0.0.1:${port}`;
  const plain = '/v1/facilities?state=TX&limit=25';
  const geo = `/v1/facilities?near=${latitude},${longitude}&radius_km=25&limit=25`;
  const found = await (await fetch(`${base}${geo}`, { headers: { 'x-fcd-account': sign(geo) } })).json();
  console.log(`geo: ${found.data.length} facilities within 25 km of ${latitude},${longitude} on the first page`);
  await measure(base, plain);
  await measure(base, geo);
  const rounds = [];
  const meters = { plain: cpuMeter({ facility: pid }), geo: cpuMeter({ facility: pid }) };
  const requests = { plain: 0, geo: 0 };
  /** One measured run of `path`, its facility CPU and requests added to `side`'s. */
  const measured = async (side, path) => {
    const w = meters[side].open();
    const r = await measure(base, path);
    meters[side].close(w);
    requests[side] += r.requests.total;
    return r;
  };
  for (let r = 0; r < ROUNDS; r++) {
    const p = summary('GET /v1/facilities?state=TX', await measured('plain', plain));
    const g = summary('GET /v1/facilities?near=…&radius_km=25', await measured('geo', geo));
    rounds.push({ round: r + 1, plain: p, geo: g, ratio: Number((g.requestsPerSecond / p.requestsPerSecond).toFixed(3)) });
    console.log(`round ${r + 1}: state list ${p.requestsPerSecond} req/s, geo ${g.requestsPerSecond} req/s, ratio ${rounds[r].ratio}`);
  }
  const median = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(rounds.length / 2)];
  console.table([median.plain, median.geo]);
  const facilityCpuUsPerRequest = {
    plain: usPerUnit(meters.plain.seconds('facility'), requests.plain),
    geo: usPerUnit(meters.geo.seconds('facility'), requests.geo),
  };
  console.log(`facility CPU per request: state list ${facilityCpuUsPerRequest.plain} µs, geo ${facilityCpuUsPerRequest.geo} µs`);
  const result = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
    facilities: ROWS,
    connections: CONNECTIONS,
    durationSeconds: DURATION,
    firstPageRows: found.data.length,
    plain: median.plain,
    geo: median.geo,
    ratio: median.ratio,
    facilityCpuUsPerRequest,
    rounds,
  };
  mkdirSync(resolve(root, 'bench-results'), { recursive: true });
  writeFileSync(resolve(root, `bench-results/geo-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  await stopAll();
  await new Promise((r) => setTimeout(r, 500));
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}
