#!/usr/bin/env tsx
// The seeded fault soak (docs/soak.md): `npm run soak -- --minutes N --seed S [--redis cluster]`.
// The whole system on private backends, the workload and the nemesis at once for N minutes, then
// the checker reads the history and the databases against the system's promises. Writes
// .run/soak/<seed>-<redis>/{history.jsonl,snapshot.json,report.json,summary.md,logs/}; exits 1 on any
// violation. `--check <dir>` runs the checker again on a run's history and snapshot (after a fix
// to the checker, or to read a counter-example again) without running anything.
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { repoRoot, TestCertificates } from '@fcd/testing';
import { parse } from 'yaml';
import { check } from './checker';
import { HistoryWriter, readHistory, type Snapshot, type SoakMeta } from './history';
import { Nemesis } from './nemesis';
import { Receivers } from './receivers';
import { planFaults, seededRandom } from './schedule';
import { takeSnapshot, waitForDrain } from './snapshot';
import { renderSummary } from './summary';
import {
  REPLICAS,
  RETRY_JITTER,
  RETRY_SCHEDULE_MS,
  startTopology,
  type Topology,
  WEBHOOK_CONNECT_TIMEOUT_MS,
  WEBHOOK_TIMEOUT_MS,
} from './topology';
import { createAccounts, seedFacilities, startWorkload } from './workload';

/** After a fault is healed, how long errors may go on: a pool's reconnect, a stream's re-dial, a replica's start (docs/soak.md). */
const RECOVERY_MS = 30_000;
/** The longest SIGSTOP the schedule draws: a paused dispatcher sends what it had claimed when it continues. */
const LONGEST_PAUSE_MS = 6_000;

function args() {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '4' },
      seed: { type: 'string', default: '1' },
      redis: { type: 'string', default: 'single' },
      check: { type: 'string' },
    },
  });
  const redis = values.redis === 'cluster' ? 'cluster' : 'single';
  return { minutes: Number(values.minutes), seed: Number(values.seed), redis, check: values.check } as const;
}

/** Each service's memory limit in the chart (its own, else the defaults'). */
async function chartMemoryLimits(): Promise<Record<string, number>> {
  const values = parse(await readFile(join(repoRoot, 'deploy/helm/facility-compliance/values.yaml'), 'utf8')) as Record<
    string,
    { resources?: { limits?: { memory?: string } } }
  >;
  const bytes = (q: string | undefined) => {
    const m = /^(\d+)(Mi|Gi)$/.exec(q ?? '');
    if (!m) throw new Error(`memory limit ${q} is not in Mi or Gi`);
    return Number(m[1]) * (m[2] === 'Gi' ? 1024 ** 3 : 1024 ** 2);
  };
  const fallback = values.serviceDefaults?.resources?.limits?.memory;
  return Object.fromEntries(Object.keys(REPLICAS).map((s) => [s, bytes(values[s]?.resources?.limits?.memory ?? fallback)]));
}

const log = (msg: string) => process.stderr.write(`soak ${new Date().toISOString()} ${msg}\n`);

/** The checker on a finished run's files: the report and summary written again, the summary printed. */
async function recheck(dir: string): Promise<number> {
  const history = await readHistory(join(dir, 'history.jsonl'));
  const snapshot = JSON.parse(await readFile(join(dir, 'snapshot.json'), 'utf8')) as Snapshot;
  const meta = history.find((r): r is SoakMeta => r.k === 'meta');
  if (!meta) throw new Error(`${dir}/history.jsonl has no meta record`);
  const report = check(history, snapshot);
  await writeFile(join(dir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  const summary = renderSummary(meta, report);
  await writeFile(join(dir, 'summary.md'), summary);
  process.stdout.write(summary);
  return report.violations === 0 ? 0 : 1;
}

interface Run {
  out: string;
  seed: number;
  minutes: number;
  redis: 'single' | 'cluster';
  history: HistoryWriter;
  receivers: Receivers;
  topology: Topology;
}

/** The meta record: the run's configuration and the bounds the checker holds it to. */
async function metaOf(r: Run): Promise<SoakMeta> {
  return {
    k: 'meta',
    seed: r.seed,
    minutes: r.minutes,
    redis: r.redis,
    startedAt: Date.now(),
    retryScheduleMs: RETRY_SCHEDULE_MS,
    retryJitter: RETRY_JITTER,
    inFlightBoundMs: WEBHOOK_CONNECT_TIMEOUT_MS + WEBHOOK_TIMEOUT_MS + 15_000 + LONGEST_PAUSE_MS,
    recoveryMs: RECOVERY_MS,
    freeDailyLimit: 100,
    rssLimits: await chartMemoryLimits(),
  };
}

/** The workload and the nemesis for the run's minutes, then the wait for the system to catch up; the end record. */
async function play(r: Run): Promise<SoakMeta> {
  const { topology, history } = r;
  const ctx = { ...topology, history, receivers: r.receivers, random: seededRandom(r.seed ^ 0xabcdef) };
  const accounts = await createAccounts(topology.directUrl, 25, 25);
  const facilities = await seedFacilities(ctx);
  const meta = await metaOf(r);
  history.write(meta);
  const durationMs = r.minutes * 60_000;
  const faults = planFaults({ seed: r.seed, durationMs, redis: r.redis, replicas: { ...REPLICAS } });
  log(`running ${r.minutes} min, ${faults.length} faults planned`);
  const sampler = setInterval(() => void Promise.all(topology.replicas.map((x) => x.sampleRss())), 2_000);
  const workload = startWorkload(ctx, accounts, facilities);
  const nemesis = new Nemesis(topology, history);
  const playing = nemesis.play(faults, meta.startedAt);
  await new Promise((res) => setTimeout(res, durationMs));
  nemesis.stop();
  await playing;
  await workload.stop();
  log('workload stopped; waiting for the system to catch up');
  const drain = await waitForDrain(topology.directUrl, 180_000);
  log(`drained: ${JSON.stringify(drain)}`);
  await Promise.all(topology.replicas.map((x) => x.sampleRss()));
  clearInterval(sampler);
  history.write({
    k: 'end',
    t: Date.now(),
    drain,
    processes: topology.replicas.map((x) => ({
      name: x.name,
      alive: x.alive,
      peakRssBytes: x.peakRssBytes,
      limitBytes: meta.rssLimits[x.service] ?? 0,
      crashes: x.crashes,
    })),
  });
  return meta;
}

/** The graceful stop (usage flushes its counts), the snapshot, the checker; the report and summary written. */
async function finish(r: Run, meta: SoakMeta): Promise<number> {
  await Promise.all(r.topology.replicas.map((x) => x.stop()));
  const snapshot = await takeSnapshot(r.topology.directUrl);
  r.receivers.flushUnbound();
  await r.history.close();
  await writeFile(join(r.out, 'snapshot.json'), JSON.stringify(snapshot));
  const report = check(await readHistory(r.history.path), snapshot);
  await writeFile(join(r.out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  const summary = renderSummary(meta, report);
  await writeFile(join(r.out, 'summary.md'), summary);
  process.stdout.write(summary);
  return report.violations === 0 ? 0 : 1;
}

async function main(): Promise<number> {
  const { minutes, seed, redis, check: checkDir } = args();
  if (checkDir) return recheck(checkDir);
  const out = join(repoRoot, '.run/soak', `${seed}-${redis}`);
  await mkdir(out, { recursive: true });
  const history = new HistoryWriter(join(out, 'history.jsonl'));
  // A self-signed certificate for 127.0.0.1 that is its own CA (the dispatchers trust it).
  const tls = new TestCertificates();
  const cert = { cert: readFileSync(tls.certFile, 'utf8'), key: readFileSync(tls.keyFile, 'utf8'), caFile: tls.caFile };
  const receivers = new Receivers(cert, history, seededRandom(seed ^ 0x5eed));
  await receivers.start();
  log(`starting the topology (redis ${redis})`);
  await rm(join(out, 'logs'), { recursive: true, force: true });
  await mkdir(join(out, 'logs'), { recursive: true });
  const topology = await startTopology({ redis, history, caFile: cert.caFile, logDir: join(out, 'logs') });
  const run: Run = { out, seed, minutes, redis, history, receivers, topology };
  try {
    return await finish(run, await play(run));
  } finally {
    await topology.stop();
    await receivers.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(2);
  },
);
