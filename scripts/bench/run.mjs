#!/usr/bin/env node
// npm run bench — every benchmark, each against a baseline measured in the same run
// (docs/benchmarks.md). BENCH_ONLY=usage,proxied,read,delivery,filters,paced,fairness,import,geo,echo,facility-query
// chooses, as do names after `--` (`npm run bench -- facility-query`):
// - usage (usage-path.mjs): the metered hot path (gateway → usage → Redis) beside a bare Fastify;
// - proxied (proxied-path.mjs): GET /v1/facilities/{id} through the gateway beside a minimal proxy;
// - read (read-path.mjs): the facility service on a detail and a list beside bare Fastify + pg;
// - then scripts/bench/delivery.mjs, filters.mjs, paced.mjs, fairness.mjs, import.mjs, geo.mjs, echo.mjs and
//   facility-query.mjs.
// BENCH_DURATION (s, default 8) and BENCH_ROUNDS (default 3) set the HTTP rounds' length and count
// (BENCH_DURATION=2 BENCH_ROUNDS=1 for a quick check of the script).
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { root, stopAll } from './http-bench.mjs';
import { proxiedPathRound } from './proxied-path.mjs';
import { readPathRound } from './read-path.mjs';
import { targetRows } from './targets.mjs';
import { usagePathRound } from './usage-path.mjs';

const BENCHES = 'usage,proxied,read,delivery,filters,paced,fairness,import,geo,echo,facility-query';

/**
 * The arguments (`npm run bench -- geo echo`) or BENCH_ONLY: a comma-separated choice of usage,
 * proxied, read, delivery, filters, paced, fairness, import, geo, echo, facility-query (default: all eleven).
 */
async function all() {
  const named = process.argv.slice(2).flatMap((a) => a.split(','));
  const only = new Set((named.length > 0 ? named : (process.env.BENCH_ONLY ?? BENCHES).split(',')).filter((b) => b !== ''));
  const unknown = [...only].filter((b) => !BENCHES.split(',').includes(b));
  if (unknown.length > 0) throw new Error(`unknown bench ${unknown.join(', ')} (choose from ${BENCHES})`);
  const started = Date.now();
  execFileSync('bash', [resolve(root, 'scripts/services.sh')], { stdio: 'inherit' });
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
  if (only.has('usage')) await usagePathRound();
  if (only.has('proxied')) await proxiedPathRound();
  // The facility service on a read beside bare Fastify + pg running the same SQL.
  if (only.has('read')) await readPathRound();
  // The delivery benchmark (events → dispatcher → receiver, beside a bare undici loop).
  if (only.has('delivery')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/delivery.mjs')], { stdio: 'inherit' });
  // Subscription filters at fan-out: 20 subscriptions unfiltered, then with filters every event passes.
  if (only.has('filters')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/filters.mjs')], { stdio: 'inherit' });
  // The paced delivery benchmark (facility ingestion → outbox relay → JetStream → dispatcher →
  // receiver at 900 deliveries/s, then at 80 % of the rate the whole stack keeps up with, which it probes).
  if (only.has('paced')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/paced.mjs')], { stdio: 'inherit' });
  // The fairness benchmark (fresh events for one subscription while another, rate-limited to
  // 20/s, holds a 10,000-delivery backlog; beside the same stream with no backlog).
  if (only.has('fairness')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/fairness.mjs')], { stdio: 'inherit' });
  // The import benchmark (facility CLI, 50,000 rows, twice, beside COPY of the same lines).
  if (only.has('import')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/import.mjs')], { stdio: 'inherit' });
  // The geo-query benchmark (search by place beside the plain state list, facility service).
  if (only.has('geo')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/geo.mjs')], { stdio: 'inherit' });
  // The ECHO sync benchmark (sync-echo of 1,000,000 facilities and 2,000,000 violations, a no-change
  // re-sync, beside psql \copy of the same files; BENCH_ECHO_FACILITIES changes the size).
  if (only.has('echo')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/echo.mjs')], { stdio: 'inherit' });
  // The facility filter and sort benchmark (GET /v1/facilities?…&limit=100 with each filter and sort on
  // 1,000,000 facilities, beside pgbench running the statement the service issues).
  if (only.has('facility-query')) execFileSync(process.execPath, [resolve(root, 'scripts/bench/facility-query.mjs')], { stdio: 'inherit' });
  // The targets of docs/benchmarks.md ("Current figures") beside this run's figures (the rounds
  // above that ran), in one table.
  const rows = targetRows(resolve(root, 'bench-results'), started);
  if (rows.length > 0) {
    console.log('targets (docs/benchmarks.md, "Current figures"), this run:');
    console.table(rows);
  }
}

all().catch((err) => {
  console.error(err);
  stopAll(true).finally(() => process.exit(1));
});
