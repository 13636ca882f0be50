// The set-up both dispatcher benchmarks share (delivery.mjs, fairness.mjs): a private database with
// the webhook schema and the bench's subscriptions, a private JetStream stream, the built dispatcher
// (services/dispatcher/dist, built when missing) on them, publishing violation.new events, and the
// cleanup (dispatcher killed, stream deleted, database dropped).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { register } from 'tsx/esm/api';

register();
const { SecretBox, SubscriptionStore, WEBHOOK_SCHEMA, webhookMigrations } = await import('@fcd/webhooks');
const { createLogger, createPool, migrate } = await import('@fcd/service-kit');

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
export const latencyStats = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? 0 };
};

/** A subscription of the bench's account: `url`, `facility_ids` and any limits; the rest is filled in. */
const subscription = (input) => ({
  id: `wh_${randomUUID()}`,
  account_id: 'acct_bench',
  events: ['violation.new'],
  facility_ids: null,
  secret: `whsec_${randomBytes(32).toString('base64url')}`,
  now: Date.now(),
  ...input,
});

/** A fresh database `dbName` with the webhook schema and `subscriptions` created (their ids in the same order). */
async function webhookDatabase(dbName, secretKey, subscriptions) {
  const admin = new pg.Client({ connectionString: DB_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const dbUrl = new URL(DB_URL);
  dbUrl.pathname = `/${dbName}`;
  const logger = createLogger({ service: 'bench', level: 'silent' });
  const pool = createPool({ connectionString: dbUrl.toString(), applicationName: 'bench', logger });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  const store = new SubscriptionStore(pool, SecretBox.fromEnv(secretKey));
  const subscriptionIds = [];
  for (const input of subscriptions) {
    const sub = subscription(input);
    await store.create(sub, 25);
    subscriptionIds.push(sub.id);
  }
  return { pool, dbUrl, subscriptionIds };
}

/** The built dispatcher (built first when missing) on `dbUrl` and `stream`; killed when this process exits. */
function spawnDispatcher({ dbUrl, stream, secretKey, concurrency, pollMs }) {
  if (!existsSync(resolve(root, 'services/dispatcher/dist/main.js'))) {
    execFileSync('npm', ['run', 'build', '-w', '@fcd/dispatcher'], { cwd: root, stdio: 'inherit' });
  }
  // BENCH_NODE_ARGS: extra node flags for the dispatcher, to profile it (`--cpu-prof --cpu-prof-dir=/tmp/p`,
  // `--perf-basic-prof`); stop() then ends it with SIGTERM, so a profile is written.
  const nodeArgs = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : [];
  const child = spawn(process.execPath, [...nodeArgs, resolve(root, 'services/dispatcher/dist/main.js')], {
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
      DISPATCHER_CONCURRENCY: String(concurrency),
      DISPATCHER_POLL_MS: String(pollMs),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  // Killed with this process; the listener goes with the child (a bench starts many stacks).
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);
  child.once('exit', () => process.off('exit', killOnExit));
  return child;
}

/** Publishes one violation.new of `facilityId` to `stream`, created now; resolves on JetStream's ack. */
const violationPublisher = (js, stream) => (facilityId) => {
  const event = {
    id: `evt_${randomUUID()}`,
    type: 'violation.new',
    created_at: new Date().toISOString(),
    data: {
      violation: {
        id: randomUUID(),
        facility_id: facilityId,
        facility_name: 'Bench Facility',
        program: 'CAA',
        violation_type: 'emissions',
        violation_date: '2026-11-20',
        severity: 'minor',
      },
    },
  };
  return js.publish(`${stream.toLowerCase()}.violation.new`, JSON.stringify(event), { msgID: event.id });
};

/**
 * Starts a dispatcher on a fresh database and stream named after `name`, with `subscriptions`
 * created first (each `{ url, facility_ids?, rate_limit_per_second?, max_in_flight? }`; their ids
 * are returned in the same order). Resolves once the dispatcher's consumer exists, with the
 * dispatcher's `pid`, the `databaseUrl` (database `dbName`) and the `stream` (its subjects: `<stream in lower case>.>`).
 */
export async function startDispatcherBench({ name, concurrency, pollMs, subscriptions }) {
  const tag = randomBytes(4).toString('hex');
  const stream = `BENCH_${name.toUpperCase()}_${tag.toUpperCase()}`;
  const dbName = `bench_${name}_${tag}`;
  const secretKey = randomBytes(32).toString('base64');
  const { pool, dbUrl, subscriptionIds } = await webhookDatabase(dbName, secretKey, subscriptions);
  const child = spawnDispatcher({ dbUrl, stream, secretKey, concurrency, pollMs });

  const nc = await connect({ servers: NATS_URL });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);

  /** Kills the dispatcher, deletes the stream, drops the database. */
  async function stop() {
    child.removeAllListeners('exit');
    if (process.env.BENCH_NODE_ARGS) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    } else child.kill('SIGKILL');
    await jsm.streams.delete(stream).catch(() => undefined);
    await nc.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    const drop = new pg.Client({ connectionString: DB_URL });
    await drop.connect();
    await sleep(500);
    await drop.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await drop.end();
  }
  child.once('exit', (code) => {
    console.error(`dispatcher exited ${code}`);
    stop().finally(() => process.exit(1));
  });

  // The dispatcher creates the stream and its consumer at start.
  for (let i = 0; i < 300; i++) {
    try {
      await jsm.consumers.info(stream, 'bench');
      break;
    } catch {
      await sleep(100);
    }
  }

  const publishViolation = violationPublisher(js, stream);
  return { pool, subscriptionIds, publishViolation, stop, pid: child.pid, databaseUrl: dbUrl.toString(), dbName, stream };
}
