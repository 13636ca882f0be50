#!/usr/bin/env node
// Delivery benchmark: events published to JetStream → dispatcher → a local HTTP receiver.
//
// 1. N events (BENCH_EVENTS, default 5000) published as fast as JetStream acks them to a private
//    stream on the machine's NATS, one subscription matching them all; the built dispatcher
//    (services/dispatcher/dist, built when missing) delivers them to a keep-alive receiver.
//    Reports events/s ingested, deliveries/s, and event-to-delivery latency p50/p99 (receiver
//    clock minus the envelope's created_at, set at publish).
// 2. The limit: a bare undici POST loop to the same receiver, same body, same concurrency.
// Writes bench-results/delivery-<date>.json.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { register } from 'tsx/esm/api';
import { Agent, request } from 'undici';

register();
const { SecretBox, SubscriptionStore, WEBHOOK_SCHEMA, webhookMigrations } = await import('@fcd/webhooks');
const { createLogger, createPool, migrate } = await import('@fcd/service-kit');

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const EVENTS = Number(process.env.BENCH_EVENTS ?? 5000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const stream = `BENCH_DELIVERY_${randomBytes(4).toString('hex').toUpperCase()}`;
const dbName = `bench_delivery_${randomBytes(4).toString('hex')}`;
const secretKey = randomBytes(32).toString('base64');
const children = [];

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

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

// Database and subscription ---------------------------------------------------
const admin = new pg.Client({ connectionString: DB_URL });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);
await admin.end();
const dbUrl = new URL(DB_URL);
dbUrl.pathname = `/${dbName}`;
const logger = createLogger({ service: 'bench', level: 'silent' });
const pool = createPool({ connectionString: dbUrl.toString(), applicationName: 'bench', logger });
await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
await new SubscriptionStore(pool, SecretBox.fromEnv(secretKey)).create(
  {
    id: `wh_${randomUUID()}`,
    account_id: 'acct_bench',
    url: receiverUrl,
    events: ['violation.new'],
    facility_ids: null,
    secret: `whsec_${randomBytes(32).toString('base64url')}`,
    // The subscription's own limit (default 16 in flight, ADR 0014) would cap the dispatcher, not measure it.
    max_in_flight: CONCURRENCY,
    now: Date.now(),
  },
  25,
);

// Dispatcher ------------------------------------------------------------------
if (!existsSync(resolve(root, 'services/dispatcher/dist/main.js'))) {
  execFileSync('npm', ['run', 'build', '-w', '@fcd/dispatcher'], { cwd: root, stdio: 'inherit' });
}
await new Promise((resolveReady, reject) => {
  const child = spawn(process.execPath, [resolve(root, 'services/dispatcher/dist/main.js')], {
    env: {
      PATH: process.env.PATH,
      LOG_LEVEL: 'warn',
      PORT: '0',
      METRICS_PORT: '0',
      DATABASE_URL: dbUrl.toString(),
      NATS_URL,
      EVENTS_STREAM: stream,
      EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
      DISPATCHER_CONSUMER: 'bench',
      WEBHOOK_SECRET_KEY: secretKey,
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      DISPATCHER_CONCURRENCY: String(CONCURRENCY),
      DISPATCHER_POLL_MS: '100',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  child.once('exit', (code) => reject(new Error(`dispatcher exited ${code}`)));
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    if (buf.includes('"ready"') || buf.includes('ready')) resolveReady();
  });
  // LOG_LEVEL=warn hides the ready line; wait for the stream instead.
  setTimeout(resolveReady, 1500);
});

const nc = await connect({ servers: NATS_URL });
const js = jetstream(nc);
const jsm = await jetstreamManager(nc);
for (let i = 0; i < 100; i++) {
  try {
    await jsm.consumers.info(stream, 'bench');
    break;
  } catch {
    await new Promise((r) => setTimeout(r, 100));
  }
}

// 1. Through the dispatcher -----------------------------------------------------
const facility = randomUUID();
const publishStart = Date.now();
const inFlight = new Set();
for (let i = 0; i < EVENTS; i++) {
  const event = {
    id: `evt_${randomUUID()}`,
    type: 'violation.new',
    created_at: new Date().toISOString(),
    data: {
      violation: {
        id: randomUUID(),
        facility_id: facility,
        facility_name: 'Bench Facility',
        program: 'CAA',
        violation_type: 'emissions',
        violation_date: '2026-11-20',
        severity: 'minor',
      },
    },
  };
  const p = js
    .publish(`${stream.toLowerCase()}.violation.new`, JSON.stringify(event), { msgID: event.id })
    .finally(() => inFlight.delete(p));
  inFlight.add(p);
  if (inFlight.size >= 256) await Promise.race(inFlight);
}
await Promise.all(inFlight);
const publishMs = Date.now() - publishStart;
const deadline = Date.now() + 120_000;
while (received < EVENTS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
const sorted = [...latencies].sort((a, b) => a - b);
const dispatcherResult = {
  events: EVENTS,
  delivered: received,
  events_per_s_ingested: Math.round((EVENTS / publishMs) * 1000),
  deliveries_per_s: Math.round((received / Math.max(1, lastAt - publishStart)) * 1000),
  event_to_delivery_ms: { p50: pct(sorted, 50), p99: pct(sorted, 99), max: sorted.at(-1) ?? 0 },
};

// 2. Bare undici POST loop (the limit) ------------------------------------------
countLatency = false;
const agent = new Agent({ connections: CONCURRENCY, keepAliveTimeout: 30_000 });
const body = JSON.stringify({ id: `evt_${randomUUID()}`, type: 'violation.new', created_at: new Date().toISOString(), data: {} });
let sent = 0;
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
mkdirSync(resolve(root, 'bench-results'), { recursive: true });
writeFileSync(resolve(root, `bench-results/delivery-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);

// Cleanup -------------------------------------------------------------------------
for (const c of children) {
  c.removeAllListeners('exit');
  c.kill('SIGTERM');
}
await agent.close();
await jsm.streams.delete(stream).catch(() => undefined);
await nc.close();
await pool.end();
receiver.close();
const drop = new pg.Client({ connectionString: DB_URL });
await drop.connect();
await new Promise((r) => setTimeout(r, 500));
await drop.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
await drop.end();
process.exit(0);
