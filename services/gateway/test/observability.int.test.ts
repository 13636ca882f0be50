import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ApiStack,
  eventually,
  type ServiceProcess,
  startApiStack,
  startService,
  TEST_INGEST_TOKEN,
  TEST_INTERNAL_AUTH_SECRET,
  type TestAccount,
  testUrls,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Observability verified, not assumed: the five services run as processes,
 * loaded with their dist/telemetry.js like in production, exporting finished
 * spans as JSON lines (OTEL_TRACES_EXPORTER=jsonl, one file per service).
 * Real traffic goes through them; then the traces are rebuilt from the files
 * and every service's /metrics is scraped.
 */

interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: number;
  service: string;
  scope: string;
  attributes: Record<string, unknown>;
}

const KIND = { INTERNAL: 0, SERVER: 1, CLIENT: 2, PRODUCER: 3, CONSUMER: 4 } as const;
const SERVICES = ['usage', 'facility', 'webhook', 'dispatcher', 'gateway'] as const;
type Name = (typeof SERVICES)[number];

const SECRET_KEY = randomBytes(32).toString('base64');
const stream = uniqueName('OBS').toUpperCase();
const spansDir = mkdtempSync(join(tmpdir(), 'fcd-spans-'));

let stack: ApiStack;
let pro: TestAccount;
const procs: Partial<Record<Name, ServiceProcess>> = {};
const ports: Partial<Record<Name, { port: number; metricsPort: number }>> = {};
let gateway: string;

interface Received {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}
const received: Received[] = [];
let receiver: Server;
let receiverPort = 0;

const telemetryEnv = (name: Name) => ({
  OTEL_TRACES_EXPORTER: 'jsonl',
  OTEL_EXPORTER_JSONL_FILE: join(spansDir, `${name}.jsonl`),
});

function spans(): SpanRecord[] {
  const all: SpanRecord[] = [];
  for (const name of SERVICES) {
    const file = join(spansDir, `${name}.jsonl`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) if (line) all.push(JSON.parse(line) as SpanRecord);
  }
  return all;
}

const byId = (all: SpanRecord[]) => new Map(all.map((s) => [s.spanId, s]));

/** The chain of ancestors of a span (nearest first) within its trace. */
function ancestors(span: SpanRecord, all: SpanRecord[]): SpanRecord[] {
  const index = byId(all);
  const out: SpanRecord[] = [];
  let cur = span.parentSpanId ? index.get(span.parentSpanId) : undefined;
  while (cur) {
    out.push(cur);
    cur = cur.parentSpanId ? index.get(cur.parentSpanId) : undefined;
  }
  return out;
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** GET /metrics on the service's metrics port, parsed (Prometheus text format). */
async function scrape(name: Name): Promise<Sample[]> {
  const res = await fetch(`http://127.0.0.1:${ports[name]?.metricsPort}/metrics`);
  expect(res.status).toBe(200);
  const samples: Sample[] = [];
  for (const line of (await res.text()).split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string;
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The value of the one sample of `name` whose labels include `labels` (undefined when absent; throws when ambiguous). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)}: ${found.length} series`);
  return found[0]?.value;
}

async function ready(name: Name, p: ServiceProcess) {
  const line = await p.waitForLog((l) => l.msg === 'ready');
  ports[name] = { port: line.port as number, metricsPort: line.metricsPort as number };
  procs[name] = p;
}

async function ingest(body: object): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${ports.facility?.port}/internal/v1/ingest`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.text();
  return res.status;
}

async function call(path: string, init: { method?: string; body?: unknown } = {}) {
  const res = await fetch(`${gateway}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': pro.apiKey, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, text, body: text ? (JSON.parse(text) as any) : undefined };
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverPort = (receiver.address() as { port: number }).port;

  stack = await startApiStack({
    label: 'observability',
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    facilityEnv: telemetryEnv('facility'),
    webhookEnv: { ...telemetryEnv('webhook'), WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
    usageEnv: telemetryEnv('usage'),
    gatewayEnv: telemetryEnv('gateway'),
  });
  const dispatcher = await startService('dispatcher', {
    DATABASE_URL: stack.db.url,
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    ...telemetryEnv('dispatcher'),
    DISPATCHER_CONSUMER: uniqueName('obs'),
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  });
  await ready('facility', stack.facility);
  await ready('webhook', stack.webhook);
  await ready('dispatcher', dispatcher);
  await ready('usage', stack.usage);
  await ready('gateway', stack.gateways[0] as ServiceProcess);
  gateway = stack.gatewayUrls[0] as string;
  pro = await stack.createAccount('pro');
}, 90_000);

afterAll(async () => {
  await procs.dispatcher?.stop();
  await stack?.stop();
  await new Promise((r) => receiver?.close(r));
  if (!process.env.KEEP_SPANS) rmSync(spansDir, { recursive: true, force: true });
  else console.log('spans in', spansDir);
});

describe('tracing across the services', () => {
  let registryId = '';
  let facilityId = '';

  it('one trace spans gateway → usage (gRPC) → facility for a metered GET /v1/facilities', async () => {
    registryId = `77${Date.now()}`.slice(0, 12);
    expect(
      await ingest({ facilities: [{ registry_id: registryId, name: 'Lone Star Refining', state: 'TX', compliance_status: 'violation' }] }),
    ).toBe(200);
    const res = await call('/v1/facilities?state=TX');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.map((f: { registry_id: string }) => f.registry_id)).toEqual([registryId]);
    facilityId = res.body.data[0].id;

    const trace = await eventually(
      async () => {
        const all = spans();
        const root = all.find((s) => s.service === 'gateway' && s.kind === KIND.SERVER && s.attributes['http.route'] === '/v1/facilities');
        return { root, all: root ? all.filter((s) => s.traceId === root.traceId) : [] };
      },
      (t) => t.all.some((s) => s.service === 'facility' && s.kind === KIND.SERVER) && t.all.some((s) => s.service === 'usage'),
      10_000,
    );
    const root = trace.root as SpanRecord;
    expect(root.parentSpanId).toBeNull();
    const usageServer = trace.all.filter((s) => s.service === 'usage' && s.kind === KIND.SERVER);
    expect(usageServer).toHaveLength(1);
    expect(usageServer[0]?.attributes['rpc.system']).toBe('grpc');
    const facilityServer = trace.all.filter((s) => s.service === 'facility' && s.kind === KIND.SERVER);
    expect(facilityServer).toHaveLength(1);
    for (const s of [usageServer[0], facilityServer[0]] as SpanRecord[]) {
      const chain = ancestors(s, trace.all);
      // The direct parent is the gateway's client span, whose ancestor is the gateway's server span.
      expect(chain[0]).toMatchObject({ service: 'gateway', kind: KIND.CLIENT });
      expect(chain.at(-1)?.spanId).toBe(root.spanId);
    }
    expect(new Set(trace.all.map((s) => s.service))).toEqual(new Set(['gateway', 'usage', 'facility']));
  });

  it('one trace spans facility ingest → NATS publish → dispatcher consume → delivery POST, and the receiver gets its traceparent', async () => {
    // The receiver's credential in path and query: the delivery's span must not show either.
    const token = randomUUID();
    const hook = `/hook/${randomUUID()}?token=${token}`;
    const created = await call('/v1/webhooks', {
      method: 'POST',
      body: { url: `http://127.0.0.1:${receiverPort}${hook}`, events: ['violation.new'], facility_ids: [facilityId] },
    });
    expect(created.status, created.text).toBe(201);
    const secret: string = created.body.data.secret;
    expect(secret).toMatch(/^whsec_/);

    expect(await ingest({ violations: [violationRow(registryId)] })).toBe(200);
    const [got] = await eventually(
      async () => received.filter((r) => r.path === hook),
      (r) => r.length === 1,
      15_000,
    );
    const traceparent = String(got?.headers.traceparent ?? '');
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const [, traceId, postSpanId] = traceparent.split('-');

    // The receiver's traceparent names the dispatcher's POST span; walk up from it to the ingestion request.
    const trace = await eventually(
      async () => spans().filter((s) => s.traceId === traceId),
      (all) =>
        ['deliver violation.new', 'POST /internal/v1/ingest'].every((n) => all.some((s) => s.name === n)) &&
        all.some((s) => s.spanId === postSpanId),
      10_000,
    );
    const post = trace.find((s) => s.spanId === postSpanId) as SpanRecord;
    expect(post).toMatchObject({ service: 'dispatcher', kind: KIND.CLIENT, scope: '@opentelemetry/instrumentation-undici' });
    expect(post.attributes['http.response.status_code']).toBe(204);
    expect(post.attributes).toMatchObject({
      'url.full': `http://127.0.0.1:${receiverPort}/REDACTED?REDACTED`,
      'url.path': '/REDACTED',
      'url.query': '?REDACTED',
    });
    expect(JSON.stringify(spans().map((s) => s.attributes))).not.toContain(token);
    const chain = ancestors(post, trace).map((s) => ({ service: s.service, kind: s.kind, name: s.name }));
    expect(chain).toEqual([
      { service: 'dispatcher', kind: KIND.INTERNAL, name: 'deliver violation.new' },
      { service: 'dispatcher', kind: KIND.CONSUMER, name: `process ${stream.toLowerCase()}.violation.new` },
      { service: 'facility', kind: KIND.PRODUCER, name: `publish ${stream.toLowerCase()}.violation.new` },
      { service: 'facility', kind: KIND.SERVER, name: 'POST /internal/v1/ingest' },
    ]);
    // The ingestion request is the root of the trace.
    expect(ancestors(post, trace).at(-1)?.parentSpanId).toBeNull();
    // The dispatcher's log line for the delivery carries the trace and the attempt's span.
    const delivered = await (procs.dispatcher as ServiceProcess).waitForLog((l) => l.msg === 'delivered');
    expect(delivered).toMatchObject({ trace_id: traceId, span_id: post.parentSpanId });
  });

  it('puts no API key, webhook secret or signature in any span attribute', async () => {
    const all = spans();
    expect(all.length).toBeGreaterThan(10);
    const text = all.map((s) => JSON.stringify(s.attributes)).join('\n');
    expect(text).not.toContain(pro.apiKey);
    expect(text).not.toMatch(/fcd_[A-Za-z0-9]{8,}/);
    expect(text).not.toContain('whsec_');
    expect(text).not.toContain('sha256=');
    expect(text).not.toContain(TEST_INGEST_TOKEN);
    expect(text).not.toContain(TEST_INTERNAL_AUTH_SECRET);
  });
});

describe('/metrics of every service after that traffic', () => {
  it('every service exposes process metrics and its service label', async () => {
    for (const name of SERVICES) {
      const samples = await scrape(name);
      expect(value(samples, 'process_cpu_user_seconds_total'), name).toBeGreaterThan(0);
      expect(value(samples, 'nodejs_eventloop_lag_seconds'), name).toBeGreaterThanOrEqual(0);
      expect(samples.every((s) => s.labels.service === name)).toBe(true);
    }
  });

  it('gateway: RED metrics for the routes hit', async () => {
    const g = await scrape('gateway');
    const facilities = { route: '/v1/facilities', method: 'GET', status: '200' };
    expect(value(g, 'fcd_requests_total', facilities)).toBe(1);
    expect(value(g, 'fcd_request_duration_seconds_count', facilities)).toBe(1);
    expect(value(g, 'fcd_request_duration_seconds_sum', facilities)).toBeGreaterThan(0);
    expect(value(g, 'fcd_request_duration_seconds_bucket', { ...facilities, le: '+Inf' })).toBe(1);
    expect(value(g, 'fcd_requests_total', { route: '/v1/webhooks', method: 'POST', status: '201' })).toBe(1);
  });

  it('usage: the two metered requests were allowed, on the Pro tier', async () => {
    const u = await scrape('usage');
    expect(value(u, 'fcd_rate_limit_decisions_total', { tier: 'pro', outcome: 'allowed' })).toBe(2);
    expect(value(u, 'fcd_rate_limit_decisions_total', { outcome: 'rate_limited' }) ?? 0).toBe(0);
    expect(value(u, 'fcd_requests_total', { route: 'AuthorizeStream', method: 'grpc', status: 'OK' })).toBeGreaterThanOrEqual(1);
  });

  it('facility: the outbox drained, one violation.new published, RED metrics for the routes hit', async () => {
    const f = await eventually(
      () => scrape('facility'),
      (f) => value(f, 'fcd_facility_outbox_pending') === 0,
      5000,
    );
    expect(value(f, 'fcd_facility_outbox_oldest_age_seconds')).toBe(0);
    expect(value(f, 'fcd_facility_events_published_total', { type: 'violation.new' })).toBe(1);
    expect(value(f, 'fcd_facility_ingest_rows_total', { kind: 'violations', outcome: 'inserted' })).toBe(1);
    expect(value(f, 'fcd_requests_total', { route: '/v1/facilities', method: 'GET', status: '200' })).toBe(1);
    expect(value(f, 'fcd_requests_total', { route: '/internal/v1/ingest', method: 'POST', status: '200' })).toBe(2);
  });

  it('dispatcher: one event matched, one delivery succeeded on its first attempt, nothing left on the consumer', async () => {
    // The pending gauge is sampled from the consumer's info periodically: wait for the sample after the ack.
    const d = await eventually(
      () => scrape('dispatcher'),
      (d) => value(d, 'fcd_dispatcher_consumer_pending') === 0,
      10_000,
    );
    expect(value(d, 'fcd_dispatcher_events_total', { result: 'matched' })).toBe(1);
    expect(value(d, 'fcd_dispatcher_deliveries_created_total')).toBe(1);
    expect(value(d, 'fcd_dispatcher_attempts_total', { result: 'success' })).toBe(1);
    expect(value(d, 'fcd_dispatcher_deliveries_total', { result: 'succeeded' })).toBe(1);
    expect(value(d, 'fcd_dispatcher_deliveries_total', { result: 'failed' }) ?? 0).toBe(0);
    expect(value(d, 'fcd_dispatcher_attempt_duration_seconds_count', { result: 'success' })).toBe(1);
    expect(value(d, 'fcd_dispatcher_attempt_duration_seconds_sum', { result: 'success' })).toBeGreaterThan(0);
    expect(value(d, 'fcd_dispatcher_event_to_first_attempt_seconds_count')).toBe(1);
    expect(value(d, 'fcd_dispatcher_consumer_pending')).toBe(0);
    expect(value(d, 'fcd_dispatcher_secret_unreadable_total')).toBe(0);
    expect(value(d, 'fcd_dispatcher_retries_scheduled_total')).toBe(0);
    expect(value(d, 'fcd_dispatcher_deactivations_total')).toBe(0);
  });

  it('webhook: RED metrics for the subscription created through the gateway', async () => {
    const w = await scrape('webhook');
    const create = { route: '/v1/webhooks', method: 'POST', status: '201' };
    expect(value(w, 'fcd_requests_total', create)).toBe(1);
    expect(value(w, 'fcd_request_duration_seconds_count', create)).toBe(1);
    expect(value(w, 'fcd_request_duration_seconds_sum', create)).toBeGreaterThan(0);
  });

  it('passes promtool check metrics on all five services (scripts/debian-tool.sh installs promtool)', async () => {
    for (const name of SERVICES) {
      const text = await (await fetch(`http://127.0.0.1:${ports[name]?.metricsPort}/metrics`)).text();
      expect(text, name).toContain('fcd_requests_total');
      const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
      expect(run.error, 'promtool is installed').toBeUndefined();
      expect({ name, status: run.status, problems: `${run.stdout}${run.stderr}`.trim() }).toEqual({ name, status: 0, problems: '' });
    }
  });
});
