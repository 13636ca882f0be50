#!/usr/bin/env node
// Subscription filters at fan-out: the same workload with SUBSCRIPTIONS subscriptions (default 20)
// unfiltered, then carrying filters on states, programs and epa_regions that every event passes, so
// both variants create the same deliveries and differ only in the filters the fan-out evaluates
// (docs/webhooks.md "Filters": in the fan-out's one statement per batch, no query per delivery).
//
// Each round: a fresh database and stream (dispatcher-bench.mjs), the built dispatcher, BENCH_WARMUP
// events (default 300) delivered and not counted, then BENCH_EVENTS events (default 2000)
// violation.new, each with a facility snapshot in Ohio or Texas, published as fast as JetStream acks
// them; every subscription matches every event. Two phases, each measured from its first publish:
// - live: deliveries/s until the receiver got all E × N deliveries;
// - fan-out alone: the subscriptions paused (the claim skips them), another BENCH_EVENTS events;
//   events/s until every delivery row exists (deliveries.created_at, the fan-out statement's time);
// and in each, the dispatcher's and the Postgres backends' CPU µs per event.
// Rounds alternate unfiltered, filtered (BENCH_ROUNDS pairs, default 3) so the machine's drift
// falls on both; the ratios filtered / unfiltered are of the medians.
// Writes bench-results/filters-<date>.json.
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { cpuSeconds, postgresBackendsCpu, postgresCpuBetween, usPerUnit } from './cpu.mjs';
import { NATS_URL, root, sleep, startDispatcherBench } from './dispatcher-bench.mjs';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 300);
const SUBSCRIPTIONS = Math.min(25, Number(process.env.BENCH_SUBSCRIPTIONS ?? 20));
const PAIRS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 64;

/** Two facilities' snapshots, as the facility service writes them into events (`data.facility`). */
const FACILITIES = [
  { state: 'OH', epa_region: '05', programs: ['CAA', 'RCRA'] },
  { state: 'TX', epa_region: '06', programs: ['CAA', 'CWA'] },
].map((f) => ({ id: randomUUID(), name: `Bench Works ${f.state}`, city: 'Springfield', ...f, compliance_status: 'violation' }));

/** Filters every event passes, different per subscription (lists of 2 to 12 states, some regions). */
function filterFor(i) {
  const states = ['OH', 'TX', 'PA', 'MI', 'IN', 'IL', 'WI', 'MN', 'OK', 'LA', 'NM', 'AR'].slice(0, 2 + (i % 11));
  return { states, programs: i % 2 === 0 ? ['CAA'] : ['CAA', 'CWA', 'RCRA'], epa_regions: ['05', '06', ...(i % 3 === 0 ? ['04'] : [])] };
}

// Receiver: counts what arrives during the measured window --------------------------------------
let received = 0;
let lastAt = 0;
const receiver = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    received++;
    lastAt = Date.now();
    res.writeHead(204).end();
  });
});
receiver.keepAliveTimeout = 60_000;
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
const receiverUrl = `http://127.0.0.1:${receiver.address().port}/hook`;

const nc = await connect({ servers: NATS_URL });
const js = jetstream(nc);

/** Publishes `n` violation.new events to `stream`, 256 unacknowledged at most, alternating the facilities. */
async function publish(stream, n) {
  const inFlight = new Set();
  for (let i = 0; i < n; i++) {
    const facility = FACILITIES[i % FACILITIES.length];
    const event = {
      id: `evt_${randomUUID()}`,
      type: 'violation.new',
      created_at: new Date().toISOString(),
      data: {
        violation: { id: randomUUID(), facility_id: facility.id, program: 'CAA', violation_type: 'emissions', severity: 'minor' },
        facility,
      },
    };
    const p = js
      .publish(`${stream.toLowerCase()}.violation.new`, JSON.stringify(event), { msgID: event.id })
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= 256) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}

/** Waits until `condition()` holds (polled every 50 ms), at most `ms`; false if it never did. */
async function until(condition, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await sleep(50);
  }
  return false;
}

const deliveryRows = async (pool) => (await pool.query('SELECT count(*)::int AS n FROM webhook.deliveries')).rows[0].n;

/** The dispatcher's and Postgres's CPU from now until `stop()` is called, in µs per event. */
async function cpuWindow(bench) {
  const cpuStart = cpuSeconds(bench.pid);
  const pgStart = await postgresBackendsCpu(bench.pool, bench.dbName);
  return async () => ({
    dispatcher_cpu_us_per_event: usPerUnit(cpuSeconds(bench.pid) - cpuStart, EVENTS),
    postgres_cpu_us_per_event: usPerUnit(postgresCpuBetween(pgStart, await postgresBackendsCpu(bench.pool, bench.dbName)), EVENTS),
  });
}

/** Live: EVENTS events published while the subscriptions are sent to; deliveries/s until the receiver got them all. */
async function live(bench) {
  received = 0;
  const start = Date.now();
  const cpu = await cpuWindow(bench);
  await publish(bench.stream, EVENTS);
  const expected = EVENTS * SUBSCRIPTIONS;
  if (!(await until(() => received >= expected, 180_000))) throw new Error(`delivered ${received} of ${expected}`);
  return { deliveries_per_s: Math.round((received / Math.max(1, lastAt - start)) * 1000), ...(await cpu()) };
}

/**
 * Fan-out alone: every subscription paused (the claim skips it; the fan-out does not look at
 * pauses), EVENTS events published; events/s until their E × N delivery rows exist (the last row's
 * created_at, the fan-out statement's time). The CPU is the fan-out's and the event log's only.
 */
async function fanOutOnly(bench) {
  await bench.pool.query(`UPDATE webhook.subscriptions SET paused_until = now() + interval '1 hour', pause_reason = 'retry_after'`);
  const before = await deliveryRows(bench.pool);
  const start = Date.now();
  const cpu = await cpuWindow(bench);
  await publish(bench.stream, EVENTS);
  const expected = before + EVENTS * SUBSCRIPTIONS;
  if (!(await until(async () => (await deliveryRows(bench.pool)) >= expected, 120_000))) throw new Error('fan-out incomplete');
  const { rows } = await bench.pool.query('SELECT extract(epoch FROM max(created_at)) * 1000 AS last FROM webhook.deliveries');
  return { fan_out_events_per_s: Math.round((EVENTS / Math.max(1, Number(rows[0].last) - start)) * 1000), ...(await cpu()) };
}

/** One round: a fresh dispatcher and database, the subscriptions filtered or not, warm-up, live, then fan-out alone. */
async function round(filtered) {
  const subscriptions = Array.from({ length: SUBSCRIPTIONS }, (_, i) => ({
    url: receiverUrl,
    ...(filtered ? { filter: filterFor(i) } : {}),
  }));
  const bench = await startDispatcherBench({ name: 'filters', concurrency: CONCURRENCY, pollMs: 100, subscriptions });
  try {
    received = 0;
    await publish(bench.stream, WARMUP);
    if (!(await until(() => received >= WARMUP * SUBSCRIPTIONS, 120_000))) throw new Error('warm-up not delivered');
    return { filtered, events: EVENTS, live: await live(bench), fan_out: await fanOutOnly(bench) };
  } finally {
    await bench.stop();
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ratio = (a, b) => Number((a / b).toFixed(3));

/** Medians per variant of each figure (`phase.key`), and the ratios filtered / unfiltered. */
function summary(rounds) {
  const of = (filtered, phase, key) => median(rounds.filter((r) => r.filtered === filtered).map((r) => r[phase][key]));
  const figures = {
    live: ['deliveries_per_s', 'dispatcher_cpu_us_per_event', 'postgres_cpu_us_per_event'],
    fan_out: ['fan_out_events_per_s', 'dispatcher_cpu_us_per_event', 'postgres_cpu_us_per_event'],
  };
  const medians = Object.fromEntries(
    Object.entries(figures).map(([phase, keys]) => [
      phase,
      Object.fromEntries(keys.map((k) => [k, { unfiltered: of(false, phase, k), filtered: of(true, phase, k) }])),
    ]),
  );
  return {
    medians,
    ratio: {
      fan_out: ratio(medians.fan_out.fan_out_events_per_s.filtered, medians.fan_out.fan_out_events_per_s.unfiltered),
      delivery: ratio(medians.live.deliveries_per_s.filtered, medians.live.deliveries_per_s.unfiltered),
    },
  };
}

const rounds = [];
for (let i = 0; i < PAIRS; i++) {
  for (const filtered of [false, true]) {
    const r = await round(filtered);
    console.log(JSON.stringify(r));
    rounds.push(r);
  }
}
const result = {
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, node: process.version },
  subscriptions: SUBSCRIPTIONS,
  events: EVENTS,
  rounds,
  ...summary(rounds),
};
console.log(JSON.stringify(result, null, 2));
const m = result.medians;
console.log(
  `filters, ${SUBSCRIPTIONS} subscriptions, filtered / unfiltered (medians of ${PAIRS}): fan-out alone ${m.fan_out.fan_out_events_per_s.filtered} / ${m.fan_out.fan_out_events_per_s.unfiltered} events/s (ratio ${result.ratio.fan_out}), live ${m.live.deliveries_per_s.filtered} / ${m.live.deliveries_per_s.unfiltered} deliveries/s (ratio ${result.ratio.delivery})`,
);
mkdirSync(resolve(root, 'bench-results'), { recursive: true });
writeFileSync(resolve(root, `bench-results/filters-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);

await nc.close();
receiver.close();
process.exit(0);
