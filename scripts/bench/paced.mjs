#!/usr/bin/env node
// Paced delivery benchmark: webhook latency at a steady load, not while draining a backlog
// (docs/benchmarks.md, "Webhook latency at a steady load").
//
// The real path, end to end: the facility service (its ingestion API and in-process outbox relay)
// → JetStream → the dispatcher (production defaults: concurrency 64, poll 500 ms) → a keep-alive
// HTTP receiver on this machine, on a private database and stream. The bench ingests new violations
// of 100 facilities at a fixed rate (BENCH_PACED_RATE events/s, default 300): every
// BENCH_PACED_TICK_MS (default 10) the events due go in one ingestion request, so one transaction
// commits about 3 of them. BENCH_PACED_SUBSCRIPTIONS (default 3) subscriptions with the default
// limits (BENCH_PACED_MAX_IN_FLIGHT sets their max_in_flight) match every event: 300 events/s are
// 900 deliveries/s. A second run paces at 80 % of the whole stack's capacity: the highest rate it
// keeps up with, probed on fresh stacks in steps of 1.2 times up from the first rate (down when the
// first run did not keep up) until the outcome changes (BENCH_PACED_CAPACITY, deliveries/s, gives it
// instead). Each run is a fresh stack: 20 events delivered first (connections, JIT), then a
// warm-up at the rate, not counted, of at least BENCH_PACED_WARMUP_SECONDS (default 5) and until the
// stack has kept up for 2 s (a backlog the cold start left is queueing, not the latency of a steady
// load; at most BENCH_PACED_MAX_WARMUP_SECONDS, default 30, and a run that never kept up says so),
// then BENCH_PACED_SECONDS (default 30) measured, then the wait for every delivery (≤ 60 s).
// BENCH_PACED_RUNS chooses the runs: rate, capacity, listen, poll (comma-separated; default all).
//
// Latency of each first attempt of an event committed in the measured window, from the event's
// commit to its arrival at the receiver (p50 / p99 / max), and its parts, from timestamps the
// system already records (same machine, same clock):
//   commit   ≈ outbox.created_at: the envelope's created_at, taken in the ingestion transaction
//              after its lock, just before the upsert and the outbox insert (the commit follows within
//              the "commit bound" figure: created_at → the ingestion response);
//   relay    = commit → JetStream's stored timestamp of the message;
//   consumer = JetStream → deliveries.first_attempt_at (the claim's time), split into fan-out
//              (→ deliveries.created_at, the fan-out statement's time) and claim wait (→ the claim);
//   send     = the claim → arrival at the receiver (receiver clock when the body ends), split into
//              claim → delivery_attempts.started_at (signing starts) and → arrival (sign + POST).
// CPU per delivery: the dispatcher's utime + stime (/proc/<pid>/stat) from the start of the measured
// window until every delivery arrived, over the deliveries that arrived meanwhile; the facility's
// per event; Postgres's per delivery (every backend of the stack's database: ingestion, relay and
// delivery together). Also the p99 of each 5 s slice of the window (by commit time: a tail left by a
// backlog from the warm-up shows in the first slices, one from a stall where it happened) and the
// machine's busy share over the same window (all cores, /proc/stat: how much headroom the stack had).
// Prints tables; writes bench-results/paced-<date>.json.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { Agent, request } from 'undici';
import { busyShare, cpuSeconds, machineCpu, postgresBackendsCpu, postgresCpuBetween } from './cpu.mjs';
import { NATS_URL, root, sleep, startDispatcherBench } from './dispatcher-bench.mjs';
import { analyse, dump, OTHER_WRITER_TARGET, pacedRuns, print, recordedTimes, round, stats, streamTimes, TARGET } from './paced-times.mjs';

const RATE = Number(process.env.BENCH_PACED_RATE ?? 300);
const SUBSCRIPTIONS = Number(process.env.BENCH_PACED_SUBSCRIPTIONS ?? 3);
const SECONDS = Number(process.env.BENCH_PACED_SECONDS ?? 30);
/** The warm-up's least length: the window opens after it, once the stack has kept up for SETTLE_MS. */
const WARMUP_SECONDS = Number(process.env.BENCH_PACED_WARMUP_SECONDS ?? 5);
/** The warm-up's greatest length: a stack that never keeps up has its window opened then (reported). */
const MAX_WARMUP_SECONDS = Number(process.env.BENCH_PACED_MAX_WARMUP_SECONDS ?? 30);
const SETTLE_MS = 2000;
/** Kept up: no more deliveries missing than those of the events committed within this long. */
const KEPT_UP_LAG_MS = 500;
/** Deliveries/s whose 80 % the second run paces at; unset: the stack's own, probed (`stackCapacity`). */
const CAPACITY = Number(process.env.BENCH_PACED_CAPACITY ?? 0);
/** The capacity probes: each rate this many times the last, at most PROBE_MAX of them. */
const PROBE_STEP = 1.2;
const PROBE_MAX = 4;
/** A probe settles within this long and then keeps up for PROBE_HOLD_SECONDS. */
const PROBE_SECONDS = 15;
const PROBE_HOLD_SECONDS = 10;
/** The subscriptions' max_in_flight (default: the subscription default, 16). */
const MAX_IN_FLIGHT = Number(process.env.BENCH_PACED_MAX_IN_FLIGHT ?? 0);
const DUMP = process.env.BENCH_PACED_DUMP;
const FACILITIES = 100;
/** Events due within this long go in one ingestion request. */
const TICK_MS = Number(process.env.BENCH_PACED_TICK_MS ?? 10);
const RUNS = pacedRuns(process.env.BENCH_PACED_RUNS);
const INGEST_IN_FLIGHT = 4;
const INGEST_TOKEN = 'bench-ingest-token-0123456789abcdef0123';

/** The receiver: the arrival time (ms) of each delivery's first attempt, by delivery id. */
async function startReceiver() {
  const arrivals = new Map();
  let retries = 0;
  const server = createServer((req, res) => {
    req.on('data', () => undefined);
    req.on('end', () => {
      const at = Date.now();
      if (req.headers['x-service-delivery-attempt'] === '1') arrivals.set(req.headers['x-service-delivery-id'], at);
      else retries++;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { arrivals, retries: () => retries, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/** Starts the built facility service on the bench's database and stream; resolves with its ports and pid. */
function startFacility(databaseUrl, stream, env = {}) {
  return new Promise((resolvePort, reject) => {
    const child = spawn(process.execPath, [resolve(root, 'services/facility/dist/main.js')], {
      env: {
        PATH: process.env.PATH,
        LOG_LEVEL: 'info',
        PORT: '0',
        METRICS_PORT: '0',
        HOST: '127.0.0.1',
        DATABASE_URL: databaseUrl,
        NATS_URL,
        EVENTS_STREAM: stream,
        EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
        INTERNAL_AUTH_SECRET: 'bench-internal-secret-0123456789abcdef',
        INGEST_TOKEN,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // Killed with this process; the listener goes with the child (a bench starts many stacks).
    const killOnExit = () => child.kill('SIGKILL');
    process.on('exit', killOnExit);
    child.once('exit', () => process.off('exit', killOnExit));
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const line of lines) {
        if (line.includes('"msg":"ready"')) resolvePort({ ...JSON.parse(line), pid: child.pid, kill: () => child.kill('SIGTERM') });
      }
    });
    child.once('exit', (code) => reject(new Error(`facility exited with ${code}`)));
  });
}

/**
 * Posts new violations at `rate`/s until `stopAt()` (epoch ms, read as it goes): event i is due at
 * start + i/rate; every TICK_MS the events due so far go in one ingestion request (one transaction),
 * at most INGEST_IN_FLIGHT requests at a time (a late response makes the next request carry more).
 * Fills `events` as responses come in — per event, when it was due, when its request's response
 * arrived and whether it was accepted — and resolves with it when every response is in.
 */
async function pace(facility, rate, stopAt, tag, events = []) {
  const agent = new Agent({ connections: INGEST_IN_FLIGHT, keepAliveTimeout: 30_000 });
  const url = `http://127.0.0.1:${facility.port}/internal/v1/ingest`;
  const headers = { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' };
  const start = Date.now();
  const due = (i) => start + (i * 1000) / rate;
  const inFlight = new Set();
  const violation = (i) => ({
    source_id: `PACED-${tag}-${i}`,
    registry_id: `PACED-F-${i % FACILITIES}`,
    program: 'CAA',
    violation_type: `paced ${tag} ${i}`,
    violation_date: '2026-11-20',
    severity: 'minor',
  });
  const send = async (from, to) => {
    const ids = Array.from({ length: to - from }, (_, k) => from + k);
    const body = JSON.stringify({ violations: ids.map(violation) });
    const res = await request(url, { method: 'POST', headers, body, dispatcher: agent });
    const report = await res.body.json();
    const ok = res.statusCode === 200 && report.data?.events?.['violation.new'] === ids.length;
    for (const i of ids) events[i] = { due: due(i), done: Date.now(), ok };
  };
  let next = 0;
  for (;;) {
    const total = Math.ceil(((stopAt() - start) * rate) / 1000);
    if (next >= total) break;
    const dueNow = Math.min(total, Math.floor(((Date.now() - start) * rate) / 1000) + 1);
    if (dueNow > next && inFlight.size < INGEST_IN_FLIGHT) {
      const p = send(next, dueNow).finally(() => inFlight.delete(p));
      inFlight.add(p);
      next = dueNow;
    }
    await (inFlight.size < INGEST_IN_FLIGHT ? sleep(Math.max(1, Math.min(TICK_MS, due(next) - Date.now()))) : Promise.race(inFlight));
  }
  await Promise.all(inFlight);
  await agent.close();
  return events;
}

/** Whether the stack keeps up: the first attempts not yet arrived are no more than those of the events committed within KEPT_UP_LAG_MS. */
function keptUp(receiver, events, before, now) {
  let committed = 0;
  for (const e of events) if (e?.ok && e.done <= now - KEPT_UP_LAG_MS) committed++;
  return receiver.arrivals.size - before >= committed * SUBSCRIPTIONS;
}

/**
 * Waits until the stack keeps up (`keptUp`) and has for SETTLE_MS, at least WARMUP_SECONDS after
 * `started` and at most `maxSeconds`: a backlog left by the cold start is not the latency of a
 * steady load. `before`: first attempts that arrived before the pacing. Resolves with the time and
 * whether the stack settled.
 */
async function settle(receiver, events, started, before, maxSeconds = MAX_WARMUP_SECONDS) {
  let keptUpSince = null;
  for (;;) {
    await sleep(100);
    const now = Date.now();
    keptUpSince = keptUp(receiver, events, before, now) ? (keptUpSince ?? now) : null;
    if (now - started >= WARMUP_SECONDS * 1000 && keptUpSince !== null && now - keptUpSince >= SETTLE_MS) {
      return { at: now, settled: true };
    }
    if (now - started >= maxSeconds * 1000) return { at: now, settled: false };
  }
}

/** Waits until `expected` first attempts arrived and their attempts are recorded (at most 60 s). */
async function drain(receiver, pool, expected) {
  const deadline = Date.now() + 60_000;
  while (receiver.arrivals.size < expected && Date.now() < deadline) await sleep(50);
  const drainedAt = Date.now();
  while (Date.now() < deadline) {
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM webhook.delivery_attempts');
    if (rows[0].n >= receiver.arrivals.size) break;
    await sleep(100);
  }
  return drainedAt;
}

/**
 * A fresh stack: a private database and stream with the dispatcher, the facility service, the
 * receiver and the subscriptions, the facilities seeded, and 20 events delivered (connections, JIT).
 * `writer` 'listen' or 'poll': the events are written by a second facility process with no relay
 * (as the CLIs and other replicas write them), and the relay's process LISTENs for commits or
 * only polls (OUTBOX_LISTEN=false, the behaviour before the relay listened).
 */
async function startStack(tag, writer) {
  const receiver = await startReceiver();
  const limits = MAX_IN_FLIGHT ? { max_in_flight: MAX_IN_FLIGHT } : {};
  const subscriptions = Array.from({ length: SUBSCRIPTIONS }, (_, i) => ({ url: `${receiver.url}/h${i}`, ...limits }));
  const bench = await startDispatcherBench({ name: 'paced', concurrency: 64, pollMs: 500, subscriptions });
  const relay = await startFacility(bench.databaseUrl, bench.stream, writer === 'poll' ? { OUTBOX_LISTEN: 'false' } : {});
  const facility = writer ? await startFacility(bench.databaseUrl, bench.stream, { RELAY_ENABLED: 'false' }) : relay;
  const close = async () => {
    facility.kill();
    relay.kill();
    receiver.close();
    await bench.stop();
  };
  try {
    const facilities = Array.from({ length: FACILITIES }, (_, k) => ({
      registry_id: `PACED-F-${k}`,
      name: `Paced Facility ${k}`,
      state: 'TX',
      compliance_status: 'violation',
    }));
    const seeded = await fetch(`http://127.0.0.1:${facility.port}/internal/v1/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ facilities }),
    });
    if (seeded.status !== 200) throw new Error(`seeding facilities: ${seeded.status} ${await seeded.text()}`);
    const prewarmStop = Date.now() + 1000;
    const prewarm = (await pace(facility, 20, () => prewarmStop, `${tag}W`)).filter((r) => r.ok).length;
    await drain(receiver, bench.pool, prewarm * SUBSCRIPTIONS);
    return { receiver, bench, facility, relay, prewarm, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * Whether the stack keeps up with `rate` events/s: it settles within PROBE_SECONDS (as a run's
 * warm-up does), then keeps up for PROBE_HOLD_SECONDS more (a rate a little above capacity grows
 * its backlog slowly; it shows within that time), and its ingestion has answered every event due.
 */
async function probe(rate) {
  const tag = `P${Date.now().toString(36).toUpperCase()}`;
  const { receiver, facility, close } = await startStack(tag);
  try {
    const started = Date.now();
    let stop = started + (PROBE_SECONDS + PROBE_HOLD_SECONDS) * 1000;
    const events = [];
    const pacing = pace(facility, rate, () => stop, tag, events);
    const before = receiver.arrivals.size;
    let held = (await settle(receiver, events, started, before, PROBE_SECONDS)).settled;
    const holdUntil = Date.now() + PROBE_HOLD_SECONDS * 1000;
    while (held && Date.now() < holdUntil) {
      await sleep(100);
      held = keptUp(receiver, events, before, Date.now());
    }
    // The ingestion kept up too: every event due more than a second ago is committed.
    const dueBefore = Math.floor(((Date.now() - 1000 - started) * rate) / 1000);
    held &&= events.slice(0, dueBefore).every((e) => e?.ok);
    stop = Date.now();
    await pacing;
    return held;
  } finally {
    await close();
  }
}

/**
 * The whole stack's capacity in deliveries/s, from `rate` events/s and whether the first run kept up
 * with it: rates PROBE_STEP times higher (or lower) are probed until the outcome changes (at most
 * PROBE_MAX steps); the highest rate kept up with, or null when none was.
 */
async function stackCapacity(rate, keptUpFirst) {
  let best = keptUpFirst ? rate : null;
  for (let k = 1, r = rate; k <= PROBE_MAX; k++) {
    r = Math.round(keptUpFirst ? r * PROBE_STEP : r / PROBE_STEP);
    const held = await probe(r);
    console.log(`paced capacity probe: ${r * SUBSCRIPTIONS} deliveries/s ${held ? 'kept up' : 'did not keep up'}`);
    if (held) best = Math.max(best ?? 0, r);
    if (held !== keptUpFirst) break;
  }
  return best === null ? null : best * SUBSCRIPTIONS;
}

/** One paced run on a fresh stack. */
async function run(label, rate, writer) {
  const tag = Date.now().toString(36).toUpperCase();
  const { receiver, bench, facility, relay, prewarm, close } = await startStack(tag, writer);
  try {
    // The pacing runs on through the warm-up into the window, which opens once the stack keeps up.
    const started = Date.now();
    let stop = started + (MAX_WARMUP_SECONDS + SECONDS) * 1000;
    const events = [];
    const pacing = pace(facility, rate, () => stop, tag, events);
    const warmup = await settle(receiver, events, started, receiver.arrivals.size);
    const from = warmup.at;
    const to = from + SECONDS * 1000;
    stop = to;
    const cpuFrom = { dispatcher: cpuSeconds(bench.pid), facility: cpuSeconds(relay.pid), machine: machineCpu() };
    const pgFrom = await postgresBackendsCpu(bench.pool, bench.dbName);
    const sent = await pacing;
    const committed = sent.filter((r) => r.ok).length;
    const drainedAt = await drain(receiver, bench.pool, (prewarm + committed) * SUBSCRIPTIONS);
    const cpuTo = { dispatcher: cpuSeconds(bench.pid), facility: cpuSeconds(relay.pid), machine: machineCpu() };
    const postgresCpu = postgresCpuBetween(pgFrom, await postgresBackendsCpu(bench.pool, bench.dbName));
    const arrivedInWindow = [...receiver.arrivals.values()].filter((at) => at >= from && at <= drainedAt).length;
    const times = await recordedTimes(bench.pool);
    const jsTimes = await streamTimes(bench.stream);
    const result = analyse(times, jsTimes, receiver.arrivals, sent, tag, from, to);
    if (DUMP) dump(DUMP, label, times, jsTimes, receiver.arrivals);
    const committedInWindow = sent.filter((r) => r.ok && r.due >= from && r.due < to).length;
    const ingestLag = sent.filter((r) => r.due >= from && r.due < to).map((r) => r.done - r.due);
    return {
      label,
      events_per_s_offered: rate,
      deliveries_per_s_offered: rate * SUBSCRIPTIONS,
      events_per_s_committed: round(committedInWindow / SECONDS),
      ingest_response_after_due_ms: stats(ingestLag),
      failed_ingest_requests: sent.length - committed,
      ...result,
      missing: result.expected - result.arrived,
      retries: receiver.retries(),
      dispatcher_cpu_us_per_delivery: Math.round(((cpuTo.dispatcher - cpuFrom.dispatcher) * 1e6) / Math.max(1, arrivedInWindow)),
      facility_cpu_us_per_event: Math.round(((cpuTo.facility - cpuFrom.facility) * 1e6) / Math.max(1, arrivedInWindow / SUBSCRIPTIONS)),
      postgres_cpu_us_per_delivery: Math.round((postgresCpu * 1e6) / Math.max(1, arrivedInWindow)),
      machine_busy: Math.round(busyShare(cpuFrom.machine, cpuTo.machine) * 100) / 100,
      warmup_s: round((from - started) / 1000),
      warmup_settled: warmup.settled,
    };
  } finally {
    await close();
  }
}

const results = [];
const start = (label, rate, writer) => {
  console.log(
    `paced run ${label}: ${rate} events/s × ${SUBSCRIPTIONS} subscriptions, ${WARMUP_SECONDS}–${MAX_WARMUP_SECONDS} s warm-up (until it keeps up) + ${SECONDS} s…`,
  );
  return run(label, rate, writer);
};
if (RUNS.has('rate')) results.push({ ...(await start(`${RATE * SUBSCRIPTIONS}/s`, RATE)), target: TARGET });
// The second rate: 80 % of what the whole stack keeps up with (probed from the first run's outcome),
// or of BENCH_PACED_CAPACITY.
let capacity = null;
if (RUNS.has('capacity') && CAPACITY <= 0 && !RUNS.has('rate')) {
  console.log('paced: the capacity is probed from the rate run: without it (or BENCH_PACED_CAPACITY) the 80 % run is skipped');
} else if (RUNS.has('capacity')) {
  capacity = CAPACITY > 0 ? CAPACITY : await stackCapacity(RATE, results[0].warmup_settled);
  if (capacity) {
    const rate = Math.max(1, Math.round((0.8 * capacity) / SUBSCRIPTIONS));
    results.push(await start(`80 % of ${Math.round(capacity)}/s = ${rate * SUBSCRIPTIONS}/s`, rate));
  } else console.log('paced: no probed rate kept up: the 80 % run is skipped');
}
// Events written by another process (a facility replica without a relay, as the CLIs write them):
// the relay woken by LISTEN/NOTIFY, and the same with OUTBOX_LISTEN=false (its poll only).
if (RUNS.has('listen')) {
  results.push({ ...(await start(`${RATE * SUBSCRIPTIONS}/s, other writer, LISTEN`, RATE, 'listen')), target: OTHER_WRITER_TARGET });
}
if (RUNS.has('poll')) results.push({ ...(await start(`${RATE * SUBSCRIPTIONS}/s, other writer, poll only`, RATE, 'poll')), target: null });
print(results);
const out = {
  date: new Date().toISOString(),
  machine: { cpus: (await import('node:os')).cpus().length, node: process.version },
  subscriptions: SUBSCRIPTIONS,
  seconds: SECONDS,
  warmup_seconds: { min: WARMUP_SECONDS, max: MAX_WARMUP_SECONDS, settle: SETTLE_MS / 1000 },
  capacity_deliveries_per_s: capacity,
  capacity_given: CAPACITY > 0,
  target_ms: TARGET,
  runs: results,
};
mkdirSync(resolve(root, 'bench-results'), { recursive: true });
writeFileSync(resolve(root, `bench-results/paced-${out.date.slice(0, 10)}.json`), `${JSON.stringify(out, null, 2)}\n`);
process.exit(0);
