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
import { resolve } from 'node:path';
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
  start,
  startGateway,
  startUsage,
  stopAll,
  writeResult,
} from './http-bench.mjs';

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

    const sides = {
      baseline: { name: 'bare fastify (ceiling)', url: bareUrl, headers: () => ({}) },
      metered: { name: 'gateway → usage → redis', url: gatewayUrl, headers: (i) => ({ 'x-api-key': keys[i % keys.length] }) },
    };
    console.log(`usage path: warming up (${CONNECTIONS} connections)…`);
    // Rounds alternate baseline and metered, so a drift in the machine's speed (this VM's bare
    // Fastify swings 12–28 k req/s between runs) hits both sides; the median round ratio is reported.
    // CPU per request of each process (/proc utime + stime over its side's rounds): unlike req/s,
    // barely moved by the machine's speed swings, so it shows what a change saved.
    const meters = { baseline: cpuMeter({ bare: bare.pid }), metered: cpuMeter({ gateway: gateway.pid, usage: usage.pid }) };
    const { all, requests } = await alternatingRounds(sides, meters);
    const { baseline, metered, ratio } = medianRound(all);
    const efficiency = {
      bareCpuUsPerRequest: usPerUnit(meters.baseline.seconds('bare'), requests.baseline),
      gatewayCpuUsPerRequest: usPerUnit(meters.metered.seconds('gateway'), requests.metered),
      usageCpuUsPerRequest: usPerUnit(meters.metered.seconds('usage'), requests.metered),
      meanBatchSize: await meanBatchSize(usage),
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
    writeResult('usage', result);
  } finally {
    await stopAll();
    await db.drop();
  }
}
