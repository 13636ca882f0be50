// The usage-path round of run.mjs (BENCH_ONLY=usage): throughput of the metered hot path against
// the machine's ceiling.
//
// 1. A bare Fastify process answering GET /v1/account/usage with a JSON body of the same size as
//    the real one (the ceiling of this machine).
// 2. The real path: gateway → usage (gRPC batch stream) → Redis, with 100 Pro keys used
//    round-robin, GET /v1/account/usage.
// Both measured with autocannon in the same run (50 connections by default), in alternating rounds
// (BENCH_ROUNDS, default 3, of BENCH_DURATION s); prints requests/s, p50/p99 latency and the median
// round's ratio, the CPU µs per request of every process (bare server over the bare rounds, gateway
// and usage over the metered rounds; /proc/<pid>/stat), the mean authorization batch size, and
// writes bench-results/usage-<date>.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { cpuMeter, usPerUnit } from './cpu.mjs';
import {
  benchDatabase,
  CONNECTIONS,
  createProKeys,
  DURATION,
  KEYS,
  machine,
  measure,
  medianRound,
  ROUNDS,
  root,
  scrape,
  start,
  startGateway,
  startUsage,
  stopAll,
  summary,
} from './http-bench.mjs';

/** Alternating bare and metered rounds; the CPU of each process over its side's rounds. */
async function rounds(bareUrl, gatewayUrl, meteredHeaders, meters) {
  const all = [];
  const requests = { bare: 0, metered: 0 };
  for (let r = 0; r < ROUNDS; r++) {
    let w = meters.bare.open();
    const rawBare = await measure(bareUrl, () => ({}));
    meters.bare.close(w);
    w = meters.metered.open();
    const raw = await measure(gatewayUrl, meteredHeaders);
    meters.metered.close(w);
    requests.bare += rawBare.requests.total;
    requests.metered += raw.requests.total;
    const b = summary('bare fastify (ceiling)', rawBare);
    const m = summary('gateway → usage → redis', raw);
    all.push({ round: r + 1, baseline: b, metered: m, ratio: Number((m.requestsPerSecond / b.requestsPerSecond).toFixed(3)) });
    console.log(`round ${r + 1}: bare ${b.requestsPerSecond} req/s, metered ${m.requestsPerSecond} req/s, ratio ${all[r].ratio}`);
  }
  return { all, requests };
}

export async function usagePathRound() {
  const db = await benchDatabase('usage');
  try {
    const usage = await startUsage(db);
    const gateway = await startGateway(db, usage);
    const keys = await createProKeys(usage);
    const gatewayUrl = `http://127.0.0.1:${gateway.port}/v1/account/usage`;
    const sample = await fetch(gatewayUrl, { headers: { 'x-api-key': keys[0] } });
    const bodySize = (await sample.text()).length;
    const bare = await start(resolve(root, 'scripts/bench/bare-server.mjs'), { BODY_SIZE: String(bodySize) });
    const bareUrl = `http://127.0.0.1:${bare.port}/v1/account/usage`;

    console.log(`usage path: warming up (${CONNECTIONS} connections)…`);
    const meteredHeaders = (i) => ({ 'x-api-key': keys[i % keys.length] });
    await measure(bareUrl, () => ({}));
    await measure(gatewayUrl, meteredHeaders);
    // Rounds alternate baseline and metered, so a drift in the machine's speed (this VM's bare
    // Fastify swings 12–28 k req/s between runs) hits both sides; the median round ratio is reported.
    // CPU per request of each process (/proc utime + stime over its side's rounds): unlike req/s,
    // barely moved by the machine's speed swings, so it shows what a change saved.
    const meters = { bare: cpuMeter({ bare: bare.pid }), metered: cpuMeter({ gateway: gateway.pid, usage: usage.pid }) };
    const { all, requests } = await rounds(bareUrl, gatewayUrl, meteredHeaders, meters);
    const { baseline, metered, ratio } = medianRound(all);
    const usageMetrics = await scrape(usage.metricsPort);
    const efficiency = {
      bareCpuUsPerRequest: usPerUnit(meters.bare.seconds('bare'), requests.bare),
      gatewayCpuUsPerRequest: usPerUnit(meters.metered.seconds('gateway'), requests.metered),
      usageCpuUsPerRequest: usPerUnit(meters.metered.seconds('usage'), requests.metered),
      meanBatchSize: Number((usageMetrics('fcd_authorize_batch_size_sum') / usageMetrics('fcd_authorize_batch_size_count')).toFixed(1)),
    };
    const result = {
      date: new Date().toISOString(),
      machine: machine(),
      connections: CONNECTIONS,
      durationSeconds: DURATION,
      keys: KEYS,
      bodyBytes: bodySize,
      baseline,
      metered,
      ratio,
      efficiency,
      rounds: all,
    };
    console.table([baseline, metered]);
    console.log(
      `CPU per request: bare ${efficiency.bareCpuUsPerRequest} µs; metered: gateway ${efficiency.gatewayCpuUsPerRequest} µs, usage ${efficiency.usageCpuUsPerRequest} µs; mean batch ${efficiency.meanBatchSize}`,
    );
    console.log(`ratio metered/baseline (median of ${ROUNDS} rounds, shown above): ${ratio} (target ≥ 0.4)`);
    mkdirSync(resolve(root, 'bench-results'), { recursive: true });
    writeFileSync(resolve(root, `bench-results/usage-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    await stopAll();
    await db.drop();
  }
}
