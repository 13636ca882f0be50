// The read-path round of run.mjs (BENCH_ONLY=read): what the facility service costs on a read,
// against bare Fastify + pg running the same SQL (scripts/bench/bare-facility.mjs).
//
// BENCH_READ_FACILITIES demo facilities (default 1,000) on a private database. Two reads, each in
// alternating rounds (BENCH_ROUNDS of BENCH_DURATION s, autocannon, BENCH_CONNECTIONS) after one
// warm-up of each side:
// 1. detail: GET /v1/facilities/{id}, one facility by primary key;
// 2. list: GET /v1/facilities?state=…&limit=100, the first page of the most common state.
// The service is called directly with the gateway's signed x-fcd-account header (a fresh one per
// request: the verification is part of its cost); the bare server gets no header and sends the
// rows as pg returns them. Prints req/s and p50/p99 of the median round, the ratio service/bare
// (detail target ≥ 0.8) and the CPU µs per request of each process over its side's rounds (detail
// target: the service ≤ 1.25 × the bare server's). Writes bench-results/read-<date>.json.
import { resolve } from 'node:path';
import pg from 'pg';
import { register } from 'tsx/esm/api';
import { cpuMeter, usPerUnit } from './cpu.mjs';
import {
  alternatingRounds,
  benchDatabase,
  CONNECTIONS,
  DURATION,
  machine,
  medianRound,
  ROUNDS,
  root,
  seedFacilities,
  signAccount,
  start,
  startFacility,
  stopAll,
  writeResult,
} from './http-bench.mjs';

register();
const { FACILITY_COLUMNS } = await import('../../services/facility/src/store/rows.ts');

const FACILITIES = Number(process.env.BENCH_READ_FACILITIES ?? 1000);
export const READ_TARGET = { ratio: 0.8, cpu: 1.25 };

/** The first facility's id and the state with the most facilities. */
async function pick(db) {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const id = (await client.query('SELECT id FROM facility.facilities ORDER BY registry_id LIMIT 1')).rows[0].id;
  const state = (await client.query('SELECT state FROM facility.facilities GROUP BY state ORDER BY count(*) DESC, state LIMIT 1')).rows[0]
    .state;
  await client.end();
  return { id, state };
}

/** One read, both sides in alternating rounds: the median round and each side's CPU µs per request. */
async function compare(label, path, stack) {
  const sides = {
    bare: { name: `bare Fastify + pg: ${label}`, url: `http://127.0.0.1:${stack.bare.port}${path}`, headers: () => ({}) },
    service: {
      name: `facility service: ${label}`,
      url: `http://127.0.0.1:${stack.facility.port}${path}`,
      headers: () => ({ 'x-fcd-account': signAccount(path) }),
    },
  };
  for (const side of Object.values(sides)) {
    const res = await fetch(side.url, { headers: side.headers() });
    if (res.status !== 200) throw new Error(`${side.name}: GET ${path} answered ${res.status}: ${await res.text()}`);
  }
  const meters = { bare: cpuMeter({ bare: stack.bare.pid }), service: cpuMeter({ service: stack.facility.pid }) };
  const { all, requests } = await alternatingRounds(sides, meters);
  const median = medianRound(all);
  const cpu = {
    bare: usPerUnit(meters.bare.seconds('bare'), requests.bare),
    service: usPerUnit(meters.service.seconds('service'), requests.service),
  };
  const cpuRatio = Number((cpu.service / cpu.bare).toFixed(2));
  console.table([median.bare, median.service]);
  console.log(
    `${label}: ratio service/bare ${median.ratio} (median of ${ROUNDS}); CPU µs/request service ${cpu.service}, bare ${cpu.bare} (× ${cpuRatio})`,
  );
  return { path, bare: median.bare, service: median.service, ratio: median.ratio, cpuUsPerRequest: cpu, cpuRatio, rounds: all };
}

export async function readPathRound() {
  const db = await benchDatabase('read');
  try {
    seedFacilities(db, FACILITIES, 'bench-read');
    const { id, state } = await pick(db);
    const facility = await startFacility(db);
    const bare = await start(resolve(root, 'scripts/bench/bare-facility.mjs'), {
      DATABASE_URL: db.url,
      BARE_SQL: JSON.stringify({ FACILITY_COLUMNS }),
    });
    console.log(`read path: ${FACILITIES} facilities, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${DURATION} s per side…`);
    const detail = await compare('detail', `/v1/facilities/${id}`, { facility, bare });
    const list = await compare('list', `/v1/facilities?state=${state}&limit=100`, { facility, bare });
    const met = detail.ratio >= READ_TARGET.ratio && detail.cpuRatio <= READ_TARGET.cpu;
    console.log(
      `read path, detail: ratio ${detail.ratio} (target ≥ ${READ_TARGET.ratio}), CPU × ${detail.cpuRatio} (target ≤ ${READ_TARGET.cpu}): ${met ? 'met' : 'NOT met'}`,
    );
    writeResult('read', {
      date: new Date().toISOString(),
      machine: machine(),
      facilities: FACILITIES,
      connections: CONNECTIONS,
      target: READ_TARGET,
      detail,
      list,
    });
  } finally {
    await stopAll();
    await db.drop();
  }
}
