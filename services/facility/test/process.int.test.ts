import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LogLine, type ServiceProcess, startService, testUrls, uniqueName } from '@fcd/testing';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateDemoData } from '../src/demo/demo-data';
import {
  AUTH_SECRET,
  accountHeader,
  INGEST_TOKEN,
  natsManager,
  PrivateNats,
  pendingOutbox,
  readStream,
  setupDb,
  streamCount,
  type TestDb,
  waitFor,
} from './helpers';

/**
 * The built service as a process (the vitest global setup builds it):
 * ready line, auth over real HTTP, SIGTERM, bad config, the import CLI, and
 * the relay's crash and NATS-outage behaviour against a private nats-server.
 */
let db: TestDb;
let nats: PrivateNats;
let privateConn: { nc: NatsConnection; jsm: JetStreamManager } | undefined;
const running: ServiceProcess[] = [];
const tmp = mkdtempSync(join(tmpdir(), 'facility-proc-'));
/** The one stream this file creates on the machine's shared NATS (deleted in afterAll). */
const sharedStream = uniqueName('FAC_PROC').toUpperCase();

function env(natsUrl: string, stream: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: db.database.url,
    NATS_URL: natsUrl,
    INTERNAL_AUTH_SECRET: AUTH_SECRET,
    INGEST_TOKEN,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    OUTBOX_POLL_MS: '50',
    ...extra,
  };
}

async function start(e: Record<string, string>): Promise<{ svc: ServiceProcess; base: string; metrics: string }> {
  const svc = await startService('facility', e);
  running.push(svc);
  const ready = svc.logs().find((l) => l.msg === 'ready') as LogLine & { port: number; metricsPort: number };
  return { svc, base: `http://127.0.0.1:${ready.port}`, metrics: `http://127.0.0.1:${ready.metricsPort}` };
}

async function ingest(base: string, body: object): Promise<{ status: number; json: { data: { events: Record<string, number> } } }> {
  const res = await fetch(`${base}/internal/v1/ingest`, {
    method: 'POST',
    headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as { data: { events: Record<string, number> } } };
}

async function outboxTotal(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox');
  return rows[0]?.n ?? 0;
}

/** A fresh connection to the private server (an old one may still be reconnecting after a restart). */
async function privateJsm(): Promise<JetStreamManager> {
  await privateConn?.nc.close().catch(() => undefined);
  privateConn = await natsManager(nats.url);
  return privateConn.jsm;
}

function demoBody(facilities: number, seed: string) {
  const d = generateDemoData({ facilities, seed });
  return {
    body: { facilities: d.facilities, violations: d.violations, cases: d.cases },
    events: d.violations.length + d.cases.length,
    data: d,
  };
}

beforeAll(async () => {
  db = await setupDb('facility_process');
  nats = await PrivateNats.create();
});

afterAll(async () => {
  for (const s of running) await s.stop('SIGKILL');
  const shared = await natsManager(testUrls.nats).catch(() => undefined);
  await shared?.jsm.streams.delete(sharedStream).catch(() => undefined);
  await shared?.nc.close();
  await privateConn?.nc.close().catch(() => undefined);
  await nats?.destroy();
  rmSync(tmp, { recursive: true, force: true });
  await db?.close();
});

beforeEach(async () => {
  for (const s of running.splice(0)) await s.stop('SIGKILL');
  await db.pool.query('TRUNCATE outbox, cases, violations, facilities');
});

describe('facility service process', () => {
  it('logs ready with its ports, refuses requests without the gateway header, and serves health and metrics', async () => {
    const { svc, base, metrics } = await start(env(testUrls.nats, sharedStream));
    const ready = svc.logs().find((l) => l.msg === 'ready');
    expect(ready).toMatchObject({ port: expect.any(Number), metricsPort: expect.any(Number) });

    const refused = await fetch(`${base}/v1/facilities`);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
    const ok = await fetch(`${base}/v1/facilities`, { headers: { 'x-fcd-account': accountHeader('GET', '/v1/facilities') } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ data: [], pagination: { limit: 25, next_cursor: null, has_more: false } });

    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ data: { status: 'ok' } });
    await waitFor(async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : undefined), 10_000, 'ready');
    const text = await (await fetch(`${metrics}/metrics`)).text();
    for (const name of [
      'fcd_facility_outbox_pending',
      'fcd_facility_outbox_oldest_age_seconds',
      'fcd_facility_events_published_total',
      'fcd_facility_ingest_rows_total',
    ]) {
      expect(text).toContain(`# TYPE ${name}`);
    }

    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(svc.logs().some((l) => l.msg === 'shutdown complete')).toBe(true);
  });

  it('stops with one clear line when the configuration is bad', async () => {
    const svc = await startService('facility', { ...env(testUrls.nats, 'X'), INGEST_TOKEN: 'short' }, { waitReady: false });
    expect(await svc.exited).toBe(1);
    expect(svc.output.join('\n')).toMatch(/^facility: invalid configuration: INGEST_TOKEN: /m);
  });

  it('relay killed (SIGKILL) after the commit and before the publish: after restart each event is on the stream exactly once, none lost', async () => {
    const stream = uniqueName('FAC_KILL').toUpperCase();
    await nats.stop(); // nothing listens: the relay cannot publish what was committed
    const first = await start(env(nats.url, stream));
    const body = demoBody(60, 'kill-before-publish');
    const res = await ingest(first.base, body.body);
    expect(res.status).toBe(200);
    expect(await pendingOutbox(db.pool)).toBe(body.events);
    first.svc.proc.kill('SIGKILL');
    await first.svc.exited;

    await nats.start();
    await start(env(nats.url, stream));
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 20_000, 'outbox drained');
    const msgs = await readStream(await privateJsm(), stream);
    expect(msgs).toHaveLength(body.events);
    expect(new Set(msgs.map((m) => m.envelope.id)).size).toBe(body.events);
  });

  it('relay killed (SIGKILL) while publishing: after restart each event is on the stream exactly once (Nats-Msg-Id dedup)', async () => {
    const stream = uniqueName('FAC_KILL2').toUpperCase();
    await nats.start();
    const jsm = await privateJsm();
    const first = await start(env(nats.url, stream, { OUTBOX_BATCH_SIZE: '25' }));
    const body = demoBody(1500, 'kill-while-publishing');
    const res = await ingest(first.base, body.body);
    expect(res.status).toBe(200);
    await waitFor(async () => ((await streamCount(jsm, stream)) > 0 ? true : undefined), 10_000, 'first publishes');
    // Killed mid-stream: some events are published, some batches claimed or in flight, the rest waiting.
    first.svc.proc.kill('SIGKILL');
    await first.svc.exited;
    const [onStream, unsent] = [await streamCount(jsm, stream), await pendingOutbox(db.pool)];
    expect(onStream).toBeGreaterThan(0);
    expect(unsent).toBeGreaterThan(0);

    await start(env(nats.url, stream, { OUTBOX_BATCH_SIZE: '25' }));
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 30_000, 'outbox drained');
    expect(await outboxTotal()).toBe(body.events);
    const msgs = await readStream(jsm, stream);
    expect(new Set(msgs.map((m) => m.envelope.id)).size).toBe(body.events);
    expect(msgs).toHaveLength(body.events);
  });

  it('NATS stopped during ingestion: ingestion still succeeds, events go out when NATS returns', async () => {
    const stream = uniqueName('FAC_DOWN').toUpperCase();
    await nats.start();
    const { base } = await start(env(nats.url, stream));
    await waitFor(async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : undefined), 10_000, 'ready');
    await ingest(base, demoBody(5, 'before-outage').body); // creates the stream
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 10_000, 'first events');
    const before = await streamCount(await privateJsm(), stream);

    await nats.stop();
    const outage = demoBody(80, 'during-outage').data;
    const res = await ingest(base, { facilities: outage.facilities.map((f) => ({ ...f, registry_id: `X${f.registry_id}` })) });
    expect(res.status).toBe(200);
    const withEvents = await ingest(base, {
      violations: outage.violations.map((v) => ({ ...v, source_id: `X${v.source_id}`, registry_id: `X${v.registry_id}` })),
    });
    expect(withEvents.status).toBe(200);
    expect(withEvents.json.data.events['violation.new']).toBe(outage.violations.length);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(503);
    expect(
      ((await ready.json()) as { error: { details: { checks: Record<string, { status: string }> } } }).error.details.checks,
    ).toMatchObject({
      postgres: { status: 'up' },
      nats: { status: 'down' },
    });
    expect(await pendingOutbox(db.pool)).toBe(outage.violations.length);

    await nats.start();
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 20_000, 'events after NATS returned');
    const msgs = await readStream(await privateJsm(), stream);
    expect(msgs).toHaveLength(before + outage.violations.length);
    expect(new Set(msgs.map((m) => m.envelope.id)).size).toBe(msgs.length);
    await waitFor(async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : undefined), 10_000, 'ready again');
  });
});

describe('import CLI', () => {
  async function cli(args: string[]): Promise<{ code: number | null; stdout: string[] }> {
    const p = await startService('facility', { DATABASE_URL: db.database.url }, { entry: 'cli', args, waitReady: false });
    const code = await p.exited;
    return { code, stdout: p.output };
  }

  it('imports an NDJSON file, reports line-numbered errors (exit 2) and changes nothing on a second run', async () => {
    const d = generateDemoData({ facilities: 30, seed: 'cli' });
    const file = join(tmp, 'facilities.ndjson');
    const lines = d.facilities.map((f) => JSON.stringify(f));
    lines.splice(4, 0, '{"registry_id": "1", "name": "x", "state": "ZZ", "compliance_status": "violation"}', 'oops');
    writeFileSync(file, `${lines.join('\n')}\n`);

    const first = await cli(['import', file, '--kind', 'facilities', '--json']);
    expect(first.code).toBe(2);
    const report = JSON.parse(first.stdout.find((l) => l.startsWith('{')) as string);
    expect(report.counts.facilities).toEqual({ received: 32, inserted: 30, updated: 0, unchanged: 0, rejected: 2 });
    expect(report.errors).toEqual([
      { kind: 'facilities', line: 5, field: 'state', message: 'must be a USPS state code' },
      { kind: 'facilities', line: 6, field: 'line', message: 'is not valid JSON' },
    ]);

    const second = await cli(['import', file, '--kind', 'facilities']);
    expect(second.code).toBe(2);
    expect(second.stdout).toContain('facilities: 32 rows: 0 inserted, 0 updated, 30 unchanged, 2 rejected');
    expect(second.stdout).toContain('events: none');
    expect(second.stdout).toContain('error: line 5: state: must be a USPS state code');
  });

  it('seeds deterministic demo data and writes the same data set as files', async () => {
    const seeded = await cli(['seed', '--facilities', '60', '--seed', '7', '--json']);
    expect(seeded.code).toBe(0);
    const d = generateDemoData({ facilities: 60, seed: '7' });
    const { rows } = await db.pool.query<{ n: number; states: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT state)::int AS states FROM facilities',
    );
    expect(rows[0]).toEqual({ n: 60, states: 51 });
    const v = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM violations');
    expect(v.rows[0]?.n).toBe(d.violations.length);

    const out = join(tmp, 'demo');
    const files = await cli(['seed', '--facilities', '60', '--seed', '7', '--out', out, '--format', 'csv']);
    expect(files.code).toBe(0);
    const again = await cli(['import', join(out, 'cases.csv'), '--kind', 'cases', '--json']);
    expect(again.code).toBe(0);
    const report = JSON.parse(again.stdout.find((l) => l.startsWith('{')) as string);
    expect(report.counts.cases).toEqual({ received: d.cases.length, inserted: 0, updated: 0, unchanged: d.cases.length, rejected: 0 });
  });

  it('explains a usage error', async () => {
    const res = await cli(['import', 'x.txt']);
    expect(res.code).toBe(1);
    expect(res.stdout[0]).toBe('facility: --kind must be one of facilities, violations, cases');
  });
});
