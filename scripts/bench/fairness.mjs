#!/usr/bin/env node
// Fairness benchmark (docs/benchmarks.md, "Fairness"): a fresh event for one subscription is not
// stuck behind another subscription's backlog. Events published to JetStream → dispatcher → a local
// HTTP receiver.
//
// Two subscriptions of one account, each with its own receiver path and facility filter, so an
// event matches only one of them:
// - A: `rate_limit_per_second: 20` (the default `max_in_flight`, 16);
// - B: no limits set (the defaults).
// 1. Baseline: B's stream alone, BENCH_FAIR_B_EVENTS (default 600) events at BENCH_FAIR_B_RATE/s
//    (default 20) with A idle; event-to-delivery latency p50/p99/max at B's receiver (receiver
//    clock minus the envelope's created_at, set at publish).
// 2. Backlog: BENCH_FAIR_A_EVENTS (default 10,000) events for A published as fast as JetStream acks
//    them; once the dispatcher has fanned them all out (A holds a backlog of ~10,000 deliveries
//    draining at its 20/s), the same B stream again, measured the same way. A's deliveries during
//    B's window are counted: its rate over the window and in the busiest one-second window (≤ 20).
// The dispatcher's CPU µs per delivery over each B window (/proc/<pid>/stat; B's and A's deliveries
// that arrived in it). Stops when B's events are all delivered (A's backlog is left undrained; the dispatcher is killed).
// Writes bench-results/fairness-<date>.json.
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { cpuSeconds, usPerUnit } from './cpu.mjs';
import { latencyStats, root, sleep, startDispatcherBench } from './dispatcher-bench.mjs';

const A_EVENTS = Number(process.env.BENCH_FAIR_A_EVENTS ?? 10_000);
const A_RATE = Number(process.env.BENCH_FAIR_A_RATE ?? 20);
const B_EVENTS = Number(process.env.BENCH_FAIR_B_EVENTS ?? 600);
const B_RATE = Number(process.env.BENCH_FAIR_B_RATE ?? 20);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 100);

// Receiver: /a and /b ---------------------------------------------------------------
/** B's event-to-delivery latencies, by phase; A's arrival times. */
const bLatencies = { baseline: [], backlog: [] };
let bPhase = 'baseline';
const aArrivals = [];
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const now = Date.now();
    if (req.url === '/a') aArrivals.push(now);
    else {
      try {
        bLatencies[bPhase].push(now - Date.parse(JSON.parse(Buffer.concat(chunks).toString()).created_at));
      } catch {}
    }
    res.writeHead(204).end();
  });
});
receiver.keepAliveTimeout = 60_000;
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
const receiverBase = `http://127.0.0.1:${receiver.address().port}`;

// Dispatcher on its own database and stream, A and B subscribed ---------------------------
const facilityA = randomUUID();
const facilityB = randomUUID();
const bench = await startDispatcherBench({
  name: 'fairness',
  concurrency: CONCURRENCY,
  pollMs: POLL_MS,
  subscriptions: [
    { url: `${receiverBase}/a`, facility_ids: [facilityA], rate_limit_per_second: A_RATE },
    { url: `${receiverBase}/b`, facility_ids: [facilityB] },
  ],
});
const [subA] = bench.subscriptionIds;
const { pool, publishViolation: publish } = bench;

/** Kills the dispatcher (A's backlog is not drained), deletes the stream, drops the database. */
async function cleanup() {
  receiver.close();
  await bench.stop();
}

/** B's stream: B_EVENTS at B_RATE/s, evenly spaced; resolves when all are delivered (or 60 s after the last). */
async function streamB(phase) {
  bPhase = phase;
  const start = Date.now();
  const cpuFrom = cpuSeconds(bench.pid);
  const aFrom = aArrivals.length;
  const acks = [];
  for (let i = 0; i < B_EVENTS; i++) {
    const at = start + (i * 1000) / B_RATE;
    if (at > Date.now()) await sleep(at - Date.now());
    acks.push(publish(facilityB));
  }
  await Promise.all(acks);
  const deadline = Date.now() + 60_000;
  while (bLatencies[phase].length < B_EVENTS && Date.now() < deadline) await sleep(20);
  const deliveries = bLatencies[phase].length + aArrivals.length - aFrom;
  const dispatcher_cpu_us_per_delivery = usPerUnit(cpuSeconds(bench.pid) - cpuFrom, deliveries);
  console.log(`fairness ${phase}: dispatcher CPU ${dispatcher_cpu_us_per_delivery} µs per delivery (${deliveries} deliveries)`);
  const delivered = bLatencies[phase].length;
  return { start, end: Date.now(), delivered, event_to_delivery_ms: latencyStats(bLatencies[phase]), dispatcher_cpu_us_per_delivery };
}

const pendingOf = async (id) =>
  (await pool.query(`SELECT count(*)::int AS n FROM webhook.deliveries WHERE subscription_id = $1 AND status = 'pending'`, [id])).rows[0].n;

// 1. Baseline: B alone ------------------------------------------------------------------
/** A failure in the phases below still kills the dispatcher and drops the database. */
const phase = async (run) => {
  try {
    return await run();
  } catch (err) {
    console.error(err);
    await cleanup();
    process.exit(1);
  }
};
const baseline = await phase(() => streamB('baseline'));

// 2. A's burst, fanned out, then B's stream again ---------------------------------------------
/** A_EVENTS for A as fast as JetStream acks them; resolves when the dispatcher has fanned them all out. */
async function burstA() {
  const start = Date.now();
  const inFlight = new Set();
  for (let i = 0; i < A_EVENTS; i++) {
    const p = publish(facilityA).finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= 256) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  const publishMs = Date.now() - start;
  // B's events must not queue behind A's in the stream: the fairness measured is the claim's.
  const deadline = Date.now() + 300_000;
  let fannedOut = 0;
  while (Date.now() < deadline) {
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM webhook.deliveries WHERE subscription_id = $1', [subA]);
    fannedOut = rows[0].n;
    if (fannedOut >= A_EVENTS) break;
    await sleep(200);
  }
  return { publishMs, fannedOut, fanoutMs: Date.now() - start };
}
const { publishMs, fannedOut, fanoutMs } = await phase(burstA);
const aBacklogAtStart = await phase(() => pendingOf(subA));
const backlog = await phase(() => streamB('backlog'));
const aBacklogAtEnd = await phase(() => pendingOf(subA));

// A's deliveries during B's window: over the window, and in the busiest one-second window.
const aWindow = aArrivals.filter((t) => t >= backlog.start && t <= backlog.end);
let aBusiestSecond = 0;
for (let i = 0, j = 0; i < aWindow.length; i++) {
  while (aWindow[i] - aWindow[j] >= 1000) j++;
  aBusiestSecond = Math.max(aBusiestSecond, i - j + 1);
}
const windowS = (backlog.end - backlog.start) / 1000;

const summary = ({ start, end, ...rest }) => ({ ...rest, window_s: Number(((end - start) / 1000).toFixed(1)) });
const result = {
  date: new Date().toISOString(),
  machine: { cpus: (await import('node:os')).cpus().length, node: process.version },
  concurrency: CONCURRENCY,
  poll_ms: POLL_MS,
  b_stream: { events: B_EVENTS, per_s: B_RATE },
  baseline: summary(baseline),
  with_a_backlog: summary(backlog),
  a: {
    rate_limit_per_second: A_RATE,
    events: A_EVENTS,
    events_per_s_published: Math.round((A_EVENTS / publishMs) * 1000),
    fanned_out: fannedOut,
    fanout_s: Number((fanoutMs / 1000).toFixed(1)),
    backlog_at_b_start: aBacklogAtStart,
    backlog_at_b_end: aBacklogAtEnd,
    delivered_in_b_window: aWindow.length,
    per_s_in_b_window: Number((aWindow.length / windowS).toFixed(1)),
    busiest_second: aBusiestSecond,
  },
  p99_ratio: Number((backlog.event_to_delivery_ms.p99 / Math.max(1, baseline.event_to_delivery_ms.p99)).toFixed(2)),
  p99_difference_ms: backlog.event_to_delivery_ms.p99 - baseline.event_to_delivery_ms.p99,
};
console.log(JSON.stringify(result, null, 2));
mkdirSync(resolve(root, 'bench-results'), { recursive: true });
writeFileSync(resolve(root, `bench-results/fairness-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);

await cleanup();
process.exit(0);
