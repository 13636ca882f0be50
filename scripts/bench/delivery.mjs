#!/usr/bin/env node
// Delivery benchmark: events published to JetStream → dispatcher → a local HTTP receiver.
//
// 0. BENCH_WARMUP events (default 2000) delivered first, not counted (JIT, connections).
// 1. N events (BENCH_EVENTS, default 5000) published as fast as JetStream acks them to a private
//    stream on the machine's NATS, one subscription matching them all; the built dispatcher
//    (services/dispatcher/dist, built when missing) delivers them to a keep-alive receiver.
//    Reports events/s ingested, deliveries/s, event-to-delivery latency p50/p99 (receiver
//    clock minus the envelope's created_at, set at publish) and the dispatcher's CPU µs per delivery
//    (utime + stime from /proc/<pid>/stat, from the first publish until the last delivery), and the
//    Postgres backends' CPU per delivery over the same window (every connection to the bench database).
// 2. The limit: a bare undici POST loop to the same receiver, same body, same concurrency.
// Writes bench-results/delivery-<date>.json.
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { Agent, request } from 'undici';
import { cpuSeconds, postgresBackendsCpu, postgresCpuBetween } from './cpu.mjs';
import { latencyStats, root, sleep, startDispatcherBench } from './dispatcher-bench.mjs';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 5000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2000);

// Receiver ------------------------------------------------------------------
const latencies = [];
let received = 0;
let lastAt = 0;
let countLatency = true;
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const now = Date.now();
    if (countLatency) {
      received++;
      lastAt = now;
      try {
        latencies.push(now - Date.parse(JSON.parse(Buffer.concat(chunks).toString()).created_at));
      } catch {}
    }
    res.writeHead(204).end();
  });
});
receiver.keepAliveTimeout = 60_000;
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
const receiverUrl = `http://127.0.0.1:${receiver.address().port}/hook`;

// Dispatcher on its own database and stream -------------------------------------
const bench = await startDispatcherBench({
  name: 'delivery',
  concurrency: CONCURRENCY,
  pollMs: 100,
  // The subscription's own limit (default 16 in flight, ADR 0014) would cap the dispatcher, not measure it.
  subscriptions: [{ url: receiverUrl, max_in_flight: CONCURRENCY }],
});

// 0. Warm-up: a long-running dispatcher has its code compiled and its connections open; a cold
// one spends a quarter of its CPU in the JIT during the first seconds. WARMUP events are delivered
// first and not counted.
const facility = randomUUID();
for (let i = 0; i < WARMUP; i++) await bench.publishViolation(facility);
const warmDeadline = Date.now() + 60_000;
while (received < WARMUP && Date.now() < warmDeadline) await sleep(50);
received = 0;
latencies.length = 0;

// 1. Through the dispatcher -----------------------------------------------------
const publishStart = Date.now();
const cpuStart = cpuSeconds(bench.pid);
const pgStart = await postgresBackendsCpu(bench.pool, bench.dbName);
const inFlight = new Set();
for (let i = 0; i < EVENTS; i++) {
  const p = bench.publishViolation(facility).finally(() => inFlight.delete(p));
  inFlight.add(p);
  if (inFlight.size >= 256) await Promise.race(inFlight);
}
await Promise.all(inFlight);
const publishMs = Date.now() - publishStart;
const deadline = Date.now() + 120_000;
while (received < EVENTS && Date.now() < deadline) await sleep(50);
const dispatcherCpu = cpuSeconds(bench.pid) - cpuStart;
const postgresCpu = postgresCpuBetween(pgStart, await postgresBackendsCpu(bench.pool, bench.dbName));
const dispatcherResult = {
  events: EVENTS,
  warmup: WARMUP,
  delivered: received,
  events_per_s_ingested: Math.round((EVENTS / publishMs) * 1000),
  deliveries_per_s: Math.round((received / Math.max(1, lastAt - publishStart)) * 1000),
  event_to_delivery_ms: latencyStats(latencies),
  cpu_us_per_delivery: Math.round((dispatcherCpu * 1e6) / Math.max(1, received)),
  postgres_cpu_us_per_delivery: Math.round((postgresCpu * 1e6) / Math.max(1, received)),
};

// 2. Bare undici POST loop (the limit) ------------------------------------------
countLatency = false;
const agent = new Agent({ connections: CONCURRENCY, keepAliveTimeout: 30_000 });
const body = JSON.stringify({ id: `evt_${randomUUID()}`, type: 'violation.new', created_at: new Date().toISOString(), data: {} });
let sent = 0;
// Warmed like the dispatcher: WARMUP requests first, not counted.
for (let i = 0; i < WARMUP; i++) {
  const res = await request(receiverUrl, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent });
  await res.body.dump();
}
const bareStart = Date.now();
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (sent < EVENTS) {
      sent++;
      const res = await request(receiverUrl, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent });
      await res.body.dump();
    }
  }),
);
const bareMs = Date.now() - bareStart;
const bareResult = { requests: EVENTS, requests_per_s: Math.round((EVENTS / bareMs) * 1000) };

const result = {
  date: new Date().toISOString(),
  machine: { cpus: (await import('node:os')).cpus().length, node: process.version },
  concurrency: CONCURRENCY,
  dispatcher: dispatcherResult,
  bare_undici: bareResult,
  ratio: Number((dispatcherResult.deliveries_per_s / bareResult.requests_per_s).toFixed(3)),
};
console.log(JSON.stringify(result, null, 2));
console.log(
  `backlog: ${dispatcherResult.deliveries_per_s} deliveries/s, bare undici ${bareResult.requests_per_s} POST/s, ratio ${result.ratio}; CPU per delivery: dispatcher ${dispatcherResult.cpu_us_per_delivery} µs, Postgres ${dispatcherResult.postgres_cpu_us_per_delivery} µs`,
);
mkdirSync(resolve(root, 'bench-results'), { recursive: true });
writeFileSync(resolve(root, `bench-results/delivery-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);
// run.mjs reads the deliveries/s from here: the paced benchmark runs at 80 % of it.

// Cleanup -------------------------------------------------------------------------
await agent.close();
receiver.close();
await bench.stop();
process.exit(0);
