// The proxied-path round of run.mjs (BENCH_ONLY=proxied): what the gateway costs on a data read,
// against the least a reverse proxy does.
//
// The same facility service (BENCH_PROXIED_FACILITIES demo facilities, default 1,000, on a private
// database) behind, in turn:
// 1. the baseline: scripts/bench/minimal-proxy.mjs (Fastify + undici, no auth, no metering); the
//    client sends the signed x-fcd-account header itself and the proxy passes it on;
// 2. the real gateway, metering through the usage service (gRPC batch stream → Redis), 100 Pro
//    keys used round-robin.
// GET /v1/facilities/{id} of one facility, autocannon with the same settings for both, in
// alternating rounds (BENCH_ROUNDS of BENCH_DURATION s) after one warm-up of each; prints req/s and
// p50/p99 of the median round, the ratio gateway/proxy (target ≥ 0.75) and the CPU µs per request
// of every process over its side's rounds (/proc/<pid>/stat utime + stime): proxy and facility
// over the proxy rounds; gateway, usage and facility over the gateway rounds; the mean
// authorization batch size. Writes
// bench-results/proxied-<date>.json.
import { resolve } from 'node:path';
import pg from 'pg';
import { cpuMeter, usPerUnit } from './cpu.mjs';
import {
  alternatingRounds,
  benchDatabase,
  CONNECTIONS,
  createProKeys,
  DURATION,
  KEYS,
  machine,
  meanBatchSize,
  medianRound,
  ROUNDS,
  root,
  seedFacilities,
  signAccount,
  start,
  startFacility,
  startGateway,
  startUsage,
  stopAll,
  writeResult,
} from './http-bench.mjs';

const FACILITIES = Number(process.env.BENCH_PROXIED_FACILITIES ?? 1000);
const TARGET = 0.75;
const SIDES = { proxy: ['proxy', 'facility'], gateway: ['gateway', 'usage', 'facility'] };

/** The id of the first facility of `db` by registry id. */
async function firstFacilityId(db) {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const { rows } = await client.query('SELECT id FROM facility.facilities ORDER BY registry_id LIMIT 1');
  await client.end();
  return rows[0].id;
}

/** The facility service, the usage service, the gateway in front of both, and the minimal proxy. */
async function startStack(db) {
  const facility = await startFacility(db);
  const facilityUrl = `http://127.0.0.1:${facility.port}`;
  const usage = await startUsage(db);
  const gateway = await startGateway(db, usage, facilityUrl);
  const proxy = await start(resolve(root, 'scripts/bench/minimal-proxy.mjs'), { UPSTREAM_URL: facilityUrl });
  return { facility, usage, gateway, proxy };
}

/** CPU µs per request of each process of each side. */
function cpuPerRequest(meters, requests) {
  const out = {};
  for (const [side, names] of Object.entries(SIDES)) {
    out[side] = Object.fromEntries(names.map((name) => [name, usPerUnit(meters[side].seconds(name), requests[side])]));
  }
  return out;
}

export async function proxiedPathRound() {
  const db = await benchDatabase('proxied');
  try {
    seedFacilities(db, FACILITIES, 'bench-proxied');
    const facilityId = await firstFacilityId(db);
    const stack = await startStack(db);
    const keys = await createProKeys(stack.usage);
    const path = `/v1/facilities/${facilityId}`;
    const sides = {
      proxy: {
        name: 'minimal proxy → facility',
        url: `http://127.0.0.1:${stack.proxy.port}${path}`,
        headers: () => ({ 'x-fcd-account': signAccount(path) }),
      },
      gateway: {
        name: 'gateway (usage → redis) → facility',
        url: `http://127.0.0.1:${stack.gateway.port}${path}`,
        headers: (i) => ({ 'x-api-key': keys[i % keys.length] }),
      },
    };
    for (const side of Object.values(sides)) {
      const res = await fetch(side.url, { headers: side.headers(0) });
      if (res.status !== 200) throw new Error(`${side.name}: GET ${path} answered ${res.status}: ${await res.text()}`);
    }
    console.log(`proxied path: warming up (${CONNECTIONS} connections)…`);
    const pids = (names) => Object.fromEntries(names.map((name) => [name, stack[name].pid]));
    const meters = { proxy: cpuMeter(pids(SIDES.proxy)), gateway: cpuMeter(pids(SIDES.gateway)) };
    const { all, requests } = await alternatingRounds(sides, meters);
    const median = medianRound(all);
    const cpu = cpuPerRequest(meters, requests);
    // Items per authorization batch (warm-up included).
    const batch = await meanBatchSize(stack.usage);
    const result = {
      date: new Date().toISOString(),
      machine: machine(),
      connections: CONNECTIONS,
      durationSeconds: DURATION,
      keys: KEYS,
      facilities: FACILITIES,
      path: '/v1/facilities/{id}',
      proxy: median.proxy,
      gateway: median.gateway,
      ratio: median.ratio,
      target: TARGET,
      cpuUsPerRequest: cpu,
      meanBatchSize: batch,
      rounds: all,
    };
    console.table([median.proxy, median.gateway]);
    console.log(
      `CPU per request: proxy side: proxy ${cpu.proxy.proxy} µs, facility ${cpu.proxy.facility} µs; gateway side: gateway ${cpu.gateway.gateway} µs, usage ${cpu.gateway.usage} µs, facility ${cpu.gateway.facility} µs; mean batch ${batch}`,
    );
    console.log(`ratio gateway/proxy (median of ${ROUNDS} rounds, shown above): ${median.ratio} (target ≥ ${TARGET})`);
    writeResult('proxied', result);
  } finally {
    await stopAll();
    await db.drop();
  }
}
