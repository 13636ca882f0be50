// The paced benchmark's reading of a run (scripts/bench/paced.mjs): the times the stack recorded
// (JetStream's stored times, the outbox and the deliveries), their latency splits and percentiles,
// and the tables it prints.
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { latencyStats, NATS_URL } from './dispatcher-bench.mjs';

/** The paced targets at 900 deliveries/s, commit → arrival (ms): docs/benchmarks.md, "Current figures". */
export const TARGET = { p99: 100, max: 500 };
/** Events written by another process, 900 deliveries/s, the relay woken by LISTEN/NOTIFY. */
export const OTHER_WRITER_TARGET = { p99: 60, max: 500 };

/** The runs BENCH_PACED_RUNS names (comma-separated; default all four); exits on a name it does not know. */
export function pacedRuns(names = 'rate,capacity,listen,poll') {
  const runs = new Set(names.split(',').map((r) => r.trim()));
  const unknown = [...runs].filter((r) => !['rate', 'capacity', 'listen', 'poll'].includes(r));
  if (unknown.length > 0) {
    console.error(`BENCH_PACED_RUNS: ${unknown.join(', ') || '(none)'}: the runs are rate, capacity, listen and poll`);
    process.exit(2);
  }
  return runs;
}

/** The measured window's slices whose p99 are reported apart: a tail from a backlog left by the warm-up shows in the first. */
export const SLICE_MS = 5000;

/** JetStream's stored time (ms) of every message of the stream, by event id (Nats-Msg-Id). */
export async function streamTimes(stream) {
  const nc = await connect({ servers: NATS_URL });
  const js = jetstream(nc);
  const consumer = await js.consumers.get(stream);
  const times = new Map();
  for (;;) {
    const batch = await consumer.fetch({ max_messages: 1000, expires: 1000 });
    let n = 0;
    for await (const m of batch) {
      n++;
      times.set(m.headers?.get('Nats-Msg-Id'), m.info.timestampNanos / 1e6);
    }
    if (n === 0) break;
  }
  await nc.close();
  return times;
}

/** The recorded times (ms) of the deliveries and of the paced events' outbox rows. */
export async function recordedTimes(pool) {
  const ms = (col) => `extract(epoch FROM ${col}) * 1000`;
  const events = await pool.query(
    `SELECT 'evt_' || id AS id, ${ms('created_at')} AS created, payload::json -> 'data' -> 'violation' ->> 'violation_type' AS marker
       FROM facility.outbox`,
  );
  const deliveries = await pool.query(
    `SELECT d.id, d.event_id, ${ms('d.created_at')} AS created, ${ms('d.first_attempt_at')} AS claimed, ${ms('a.started_at')} AS started
       FROM webhook.deliveries d LEFT JOIN webhook.delivery_attempts a ON a.delivery_id = d.id AND a.attempt = 1`,
  );
  const TIMES = new Set(['created', 'claimed', 'started']);
  const num = (r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, TIMES.has(k) && v !== null ? Number(v) : v]));
  return { events: new Map(events.rows.map((r) => [r.id, num(r)])), deliveries: deliveries.rows.map(num) };
}

export const fmt = (s) => `${s.p50} / ${s.p99} / ${s.max}`;
export const round = (v) => Math.round(v * 10) / 10;
export const stats = (values) => {
  const s = latencyStats(values);
  return { p50: round(s.p50), p99: round(s.p99), max: round(s.max) };
};

/** The latency splits of the first attempts of events committed in [from, to). */
export function analyse({ events, deliveries }, jsTimes, arrivals, sent, tag, from, to) {
  const parts = { total: [], relay: [], consumer: [], fan_out: [], claim_wait: [], send: [], claim_to_start: [], post: [] };
  const slices = Array.from({ length: Math.ceil((to - from) / SLICE_MS) }, () => []);
  let expected = 0;
  const measured = new Set();
  for (const e of events.values()) {
    if (e.created >= from && e.created < to && e.marker?.startsWith(`paced ${tag} `)) measured.add(e.id);
  }
  for (const d of deliveries) {
    if (!measured.has(d.event_id)) continue;
    expected++;
    const arrived = arrivals.get(d.id);
    const e = events.get(d.event_id);
    const stored = jsTimes.get(d.event_id);
    if (arrived === undefined || stored === undefined || d.started === null || d.claimed === null) continue;
    const add = (k, v) => parts[k].push(v);
    add('total', arrived - e.created);
    slices[Math.floor((e.created - from) / SLICE_MS)].push(arrived - e.created);
    add('relay', stored - e.created);
    add('consumer', d.claimed - stored);
    add('fan_out', d.created - stored);
    add('claim_wait', d.claimed - d.created);
    add('send', arrived - d.claimed);
    add('claim_to_start', d.started - d.claimed);
    add('post', arrived - d.started);
  }
  // How far created_at precedes the commit at most: its ingestion request's response.
  const commitBound = [];
  for (const id of measured) {
    const e = events.get(id);
    const r = sent[Number(e.marker.split(' ')[2])];
    if (r) commitBound.push(r.done - e.created);
  }
  const latency = Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, stats(v)]));
  const sliceP99 = slices.map((v) => stats(v).p99);
  return { events: measured.size, expected, arrived: parts.total.length, latency, slice_p99: sliceP99, commit_bound: stats(commitBound) };
}

/** BENCH_PACED_DUMP=<dir>: every delivery's times (ms) as NDJSON, one file per run, to study a run. */
export function dump(dir, label, { events, deliveries }, jsTimes, arrivals) {
  const lines = deliveries.map((d) => {
    const e = events.get(d.event_id);
    return JSON.stringify({ ...d, committed: e?.created, stored: jsTimes.get(d.event_id), arrived: arrivals.get(d.id) });
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(resolve(dir, `paced-${label.replace(/[^0-9a-z]+/gi, '-')}.ndjson`), `${lines.join('\n')}\n`);
}

/** Prints the runs' tables and each run's verdict against TARGET. */
export function print(results) {
  console.table(
    results.map((r) => ({
      run: r.label,
      'deliveries/s offered': r.deliveries_per_s_offered,
      'events/s committed': r.events_per_s_committed,
      'arrived (missing)': `${r.arrived} (${r.missing})`,
      'commit→arrival p50/p99/max ms': fmt(r.latency.total),
      relay: fmt(r.latency.relay),
      consumer: fmt(r.latency.consumer),
      send: fmt(r.latency.send),
      'dispatcher CPU µs/delivery': r.dispatcher_cpu_us_per_delivery,
      'facility CPU µs/event': r.facility_cpu_us_per_event,
      'Postgres CPU µs/delivery': r.postgres_cpu_us_per_delivery,
    })),
  );
  console.table(
    results.map((r) => ({
      run: r.label,
      'fan-out (JetStream→row)': fmt(r.latency.fan_out),
      'claim wait (row→claim)': fmt(r.latency.claim_wait),
      'claim→attempt start': fmt(r.latency.claim_to_start),
      'sign+POST (start→arrival)': fmt(r.latency.post),
      'commit bound (created_at→ingest response)': fmt(r.commit_bound),
      'ingest response after due': fmt(r.ingest_response_after_due_ms),
    })),
  );
  console.table(
    results.map((r) => ({
      run: r.label,
      [`commit→arrival p99 by ${SLICE_MS / 1000} s of the window (ms)`]: r.slice_p99.join(' · '),
      'machine CPU busy (all cores, window)': `${Math.round(r.machine_busy * 100)} %`,
      'warm-up (s) until kept up': r.warmup_settled ? r.warmup_s : `${r.warmup_s} (never kept up)`,
    })),
  );
  for (const r of results) {
    // A run's own target (the other writer's), TARGET by default; null: a baseline, no verdict.
    const t = r.target === undefined ? TARGET : r.target;
    if (t === null) continue;
    const ok = r.latency.total.p99 < t.p99 && r.latency.total.max < t.max && r.missing === 0;
    console.log(
      `${r.label}: p99 ${r.latency.total.p99} ms (target < ${t.p99}), max ${r.latency.total.max} ms (target < ${t.max}): ${ok ? 'met' : 'NOT met'}`,
    );
  }
}
