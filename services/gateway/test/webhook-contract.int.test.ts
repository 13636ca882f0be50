import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Parser } from '@asyncapi/parser';
import {
  type ApiStack,
  eventually,
  repoRoot,
  type ServiceProcess,
  startApiStack,
  startService,
  TEST_USAGE_GRPC_SECRET,
  TestCertificates,
  testUrls,
  uniqueName,
} from '@fcd/testing';
import { Ajv2020 } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCS_INIT_PATH } from '../src/openapi';
import asyncapiCommitted from '../src/openapi/asyncapi.json';
import openapiCommitted from '../src/openapi/openapi.json';

/**
 * The documented payloads (docs/webhooks.md, "Documented payloads"), through a running system: the real facility service
 * (ingestion → outbox → JetStream), a dispatcher process delivering to an HTTPS receiver, and the
 * webhook API behind the gateway.
 * - /openapi.json passes `redocly lint` with the recommended-strict ruleset (redocly.yaml);
 * - /asyncapi.json parses with @asyncapi/parser without errors;
 * - every live response of the webhook routes validates against its tightened schema (ajv);
 * - one real delivery of each event type is compact JSON with keys in the order id, type,
 *   created_at, data, matches the `webhooks` section (body and headers), and verifies with the
 *   documented JavaScript and Python examples.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
const run = promisify(execFile);

const SECRET_KEY = Buffer.alloc(32, 9).toString('base64');
const doc = openapiCommitted as unknown as JsonObject;
const docPaths = doc.paths as Record<string, Record<string, JsonObject>>;
const docWebhooks = doc.webhooks as Record<string, { post: JsonObject }>;
const EVENT_TYPES = ['violation.new', 'case.new', 'case.updated', 'facility.status_changed', 'webhook.test'];

// ---- validation against the document (JSON pointers into it, so $refs resolve) ----
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
addFormats(ajv);
ajv.addSchema(doc, 'openapi.json');
const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

function resolveRef(node: Json | undefined): { value: JsonObject; pointer?: string } {
  const ref = node && typeof node === 'object' && !Array.isArray(node) ? node.$ref : undefined;
  if (typeof ref !== 'string') return { value: (node ?? {}) as JsonObject };
  let target: Json = doc;
  for (const part of ref.replace(/^#\//, '').split('/')) target = (target as JsonObject)[part] as Json;
  return { value: target as JsonObject, pointer: ref.replace(/^#/, '') };
}

function validateAt(pointer: string, value: unknown): string | null {
  const validate = ajv.getSchema(`openapi.json#${pointer}`);
  if (!validate) return `no schema at ${pointer}`;
  return validate(value) ? null : JSON.stringify(validate.errors);
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

/** The answer is one the document promises for `operation` (e.g. "GET /v1/webhooks/{webhook_id}"): status, body schema. */
function expectDocumented(operation: string, answer: Answer): void {
  const [method, path] = operation.split(' ') as [string, string];
  const responses = docPaths[path]?.[method.toLowerCase()]?.responses as JsonObject | undefined;
  const entry = responses?.[String(answer.status)];
  expect(entry, `${operation} answered ${answer.status}: ${answer.text.slice(0, 300)}`).toBeDefined();
  const { value: response, pointer } = resolveRef(entry);
  const base = pointer ?? `/paths/${escapePointer(path)}/${method.toLowerCase()}/responses/${answer.status}`;
  if (response.content) {
    expect(
      validateAt(`${base}/content/application~1json/schema`, answer.body),
      `${operation} ${answer.status}: ${answer.text.slice(0, 600)}`,
    ).toBe(null);
  } else {
    expect(answer.text).toBe('');
  }
}

// ---- an HTTPS receiver recording raw bodies ----
interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}
const received: Received[] = [];
const BIG_BODY = 'r'.repeat(5000);
let receiverServer: Server;
let receiverPort = 0;

let certs: TestCertificates;
let stack: ApiStack;
let dispatcher: ServiceProcess | undefined;
let gateway: string;
let proKey: string;
let freeKey: string;
let hookId = '';
let hookSecret = '';
let tmp: string;
const stream = uniqueName('WH_CONTRACT').toUpperCase();

async function call(path: string, init: { method?: string; key?: string; body?: unknown } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (init.key) headers['x-api-key'] = init.key;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${gateway}${path}`, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: text && /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : undefined,
  };
}

const FACILITY = { registry_id: '110000777001', name: 'Contract Works', state: 'TX', compliance_status: 'no_violation', programs: ['CAA'] };
const CASE = {
  case_number: 'CONTRACT-CASE-1',
  case_type: 'judicial',
  status: 'filed',
  lead_agency: 'EPA',
  filed_date: '2026-03-01',
  registry_ids: [FACILITY.registry_id],
};

async function ingest(body: object): Promise<void> {
  const r = await stack.ingest(body);
  expect(r.status, r.text).toBe(200);
  expect(JSON.parse(r.text).data.errors, r.text).toEqual([]);
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'wh-contract-'));
  certs = new TestCertificates();
  receiverServer = createServer({ cert: readFileSync(certs.certFile), key: readFileSync(certs.keyFile) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        path: req.url ?? '',
        headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
        body: Buffer.concat(chunks).toString('utf8'),
      });
      res.writeHead(200, { 'content-type': 'text/plain', 'x-receiver': 'contract' }).end(BIG_BODY);
    });
  });
  await new Promise<void>((r) => receiverServer.listen(0, '127.0.0.1', r));
  receiverPort = (receiverServer.address() as { port: number }).port;

  stack = await startApiStack({
    label: 'webhook_contract',
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  gateway = stack.gateway;
  dispatcher = await startService('dispatcher', {
    DATABASE_URL: stack.db.url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DISPATCHER_CONSUMER: 'contract',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    NODE_EXTRA_CA_CERTS: certs.certFile,
    USAGE_GRPC_ADDRESS: `127.0.0.1:${stack.usageEnv.GRPC_PORT}`,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
  });
  await ingest({ facilities: [FACILITY] });
  proKey = (await stack.createAccount('pro')).apiKey;
  freeKey = (await stack.createAccount('free')).apiKey;
  const created = await call('/v1/webhooks', {
    method: 'POST',
    key: proKey,
    body: {
      url: `https://127.0.0.1:${receiverPort}/hook`,
      events: ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'],
    },
  });
  expect(created.status, created.text).toBe(201);
  hookId = created.body.data.id;
  hookSecret = created.body.data.secret;

  // One event of each type: a violation, a case, the case's status change, the facility's status change; and a test event.
  await ingest({
    violations: [
      {
        source_id: 'contract-v1',
        registry_id: FACILITY.registry_id,
        program: 'CAA',
        violation_type: 'Emissions',
        violation_date: '2026-02-01',
        severity: 'minor',
      },
    ],
    cases: [CASE],
  });
  await ingest({ cases: [{ ...CASE, status: 'active' }], facilities: [{ ...FACILITY, compliance_status: 'violation' }] });
  expect((await call(`/v1/webhooks/${hookId}/test`, { method: 'POST', key: proKey })).status).toBe(202);
  await eventually(
    async () => received.map((r) => JSON.parse(r.body).type as string),
    (types) => EVENT_TYPES.every((t) => types.includes(t)),
    30_000,
  );
}, 120_000);

afterAll(async () => {
  await dispatcher?.stop();
  await stack?.stop();
  receiverServer?.closeAllConnections();
  await new Promise((r) => receiverServer?.close(r));
  certs?.remove();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('the published documents', () => {
  it('/openapi.json passes @redocly/cli lint with the recommended-strict ruleset (redocly.yaml)', async () => {
    const served = await call('/openapi.json');
    expect(served.status).toBe(200);
    expect(served.body).toEqual(openapiCommitted);
    expect(readFileSync(resolve(repoRoot, 'redocly.yaml'), 'utf8')).toMatch(/extends:\s*\n\s*- recommended-strict\s*$/m);
    const file = join(tmp, 'openapi.json');
    writeFileSync(file, served.text);
    const result = await run(
      resolve(repoRoot, 'node_modules/.bin/redocly'),
      ['lint', file, '--config', resolve(repoRoot, 'redocly.yaml'), '--format', 'json'],
      {
        cwd: repoRoot,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        maxBuffer: 16 * 1024 * 1024,
      },
    ).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );
    const report = JSON.parse(result.stdout) as {
      totals: { errors: number; warnings: number };
      problems: Array<{ ruleId: string; message: string }>;
    };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(result.code, result.stderr).toBe(0);
  }, 60_000);

  it('/asyncapi.json parses with @asyncapi/parser with no errors, and describes the five event types', async () => {
    const served = await call('/asyncapi.json');
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(served.headers.get('x-ratelimit-limit')).toBeNull();
    expect(served.body).toEqual(asyncapiCommitted);
    const { document, diagnostics } = await new Parser().parse(served.text);
    expect(diagnostics.map((d) => `${d.severity} ${d.code}: ${d.message} at ${d.path.join('.')}`)).toEqual([]);
    expect(document?.version()).toBe('3.1.0');
    const messages = document?.allMessages().all() ?? [];
    expect(messages.map((m) => m.name()).sort()).toEqual([...EVENT_TYPES].sort());
    expect(
      document
        ?.operations()
        .all()
        .every((o) => o.action() === 'send'),
    ).toBe(true);
  });

  it('the OpenAPI webhooks section has one entry per event type, with the signature headers', () => {
    expect(Object.keys(docWebhooks).sort()).toEqual([...EVENT_TYPES].sort());
    for (const [type, item] of Object.entries(docWebhooks)) {
      const headers = (item.post.parameters as Json[]).map((p) => resolveRef(p).value.name);
      expect(headers, type).toEqual(
        expect.arrayContaining(['webhook-id', 'webhook-timestamp', 'webhook-signature', 'X-Service-Signature', 'X-Service-Event-Id']),
      );
      const schema = resolveRef(((item.post.requestBody as JsonObject).content as JsonObject)['application/json'] as JsonObject).value;
      const envelope = resolveRef((schema as JsonObject).schema).value;
      expect((envelope.properties as JsonObject).type).toEqual({ type: 'string', const: type });
    }
  });

  it('/docs shows "Receiving webhooks" with every event type and the JavaScript and Python verification examples', async () => {
    // /docs is Scalar's page, rendered in the browser from the served /openapi.json: the section is
    // the "Receiving webhooks" tag (its Markdown, with both examples as code blocks) and the webhooks
    // it tags. docs-ui.int.test.ts shows that Chromium renders it.
    const page = await call('/docs');
    expect(page.status).toBe(200);
    expect(page.text).toContain(`<script src="${DOCS_INIT_PATH}"></script>`);
    expect((await call(DOCS_INIT_PATH)).text).toContain(`Scalar.createApiReference('#docs', {"url":"/openapi.json",`);
    const served = (await call('/openapi.json')).body as {
      tags: Array<{ name: string; description: string }>;
      webhooks: Record<string, { post: { tags: string[] } }>;
    };
    const about = served.tags.find((t) => t.name === 'Receiving webhooks')?.description ?? '';
    const js = readFileSync(resolve(repoRoot, 'examples/webhook-verify/verify.mjs'), 'utf8').trimEnd();
    const py = readFileSync(resolve(repoRoot, 'examples/webhook-verify/verify_webhook.py'), 'utf8').trimEnd();
    expect(about).toContain('## Verifying a delivery');
    expect(about).toContain(`### JavaScript (standardwebhooks)\n\n\`\`\`js\n${js}\n\`\`\``);
    expect(about).toContain(`### Python (standard library)\n\n\`\`\`python\n${py}\n\`\`\``);
    expect(about).toContain('def verify_webhook(secret: str, headers: dict, raw_body: bytes, now=None) -> bool:');
    expect(about).toContain('export function verifyWebhook(secret, headers, rawBody) {');
    expect(Object.keys(served.webhooks).sort()).toEqual([...EVENT_TYPES].sort());
    for (const type of EVENT_TYPES) expect(served.webhooks[type]?.post.tags, type).toEqual(['Receiving webhooks']);
  });
});

describe('real deliveries of each event type', () => {
  const delivery = (type: string) => received.find((r) => JSON.parse(r.body).type === type) as Received;

  it('send the envelope as compact JSON with keys in the order id, type, created_at, data', () => {
    for (const type of EVENT_TYPES) {
      const got = delivery(type);
      const parsed = JSON.parse(got.body) as Record<string, unknown>;
      expect(Object.keys(parsed), type).toEqual(['id', 'type', 'created_at', 'data']);
      expect(got.body, type).toBe(JSON.stringify(parsed));
      expect(got.headers['content-type']).toBe('application/json');
    }
  });

  it('match the webhooks section: the body against its envelope schema, each documented header against its schema', () => {
    for (const type of EVENT_TYPES) {
      const got = delivery(type);
      const post = docWebhooks[type]?.post as JsonObject;
      const bodyRef = resolveRef(((post.requestBody as JsonObject).content as JsonObject)['application/json'] as JsonObject).value.schema;
      expect(validateAt(resolveRef(bodyRef).pointer as string, JSON.parse(got.body)), `${type}: ${got.body}`).toBe(null);
      for (const p of post.parameters as Json[]) {
        const { value, pointer } = resolveRef(p);
        const name = String(value.name).toLowerCase();
        expect(got.headers[name], `${type} header ${name}`).toBeDefined();
        expect(validateAt(`${pointer}/schema`, got.headers[name]), `${type} header ${name}: ${got.headers[name]}`).toBe(null);
      }
    }
  });

  it('verify with the documented JavaScript example (standardwebhooks); a tampered body, id or timestamp is refused', async () => {
    const { verifyWebhook } = (await import(pathToFileURL(resolve(repoRoot, 'examples/webhook-verify/verify.mjs')).href)) as {
      verifyWebhook: (secret: string, headers: Record<string, string>, body: string) => unknown;
    };
    for (const type of EVENT_TYPES) {
      const got = delivery(type);
      expect(verifyWebhook(hookSecret, got.headers, got.body), type).toEqual(JSON.parse(got.body));
      expect(() => verifyWebhook(hookSecret, got.headers, got.body.replace('"data":{', '"data":{"x":1,'))).toThrow();
      expect(() => verifyWebhook(hookSecret, { ...got.headers, 'webhook-id': `${got.headers['webhook-id']}x` }, got.body)).toThrow();
      const ts = String(Number(got.headers['webhook-timestamp']) - 1);
      expect(() => verifyWebhook(hookSecret, { ...got.headers, 'webhook-timestamp': ts }, got.body)).toThrow();
    }
  });

  it('verify with the documented Python example (standard library only); tampered deliveries are refused', async () => {
    const cases = EVENT_TYPES.flatMap((type) => {
      const got = delivery(type);
      const ts = Number(got.headers['webhook-timestamp']);
      const tampered = got.body.replace('"data":{', '"data":{"x":1,');
      return [
        { name: `${type} as sent`, headers: got.headers, body: got.body, now: ts, expect: [true, true] },
        { name: `${type} body tampered`, headers: got.headers, body: tampered, now: ts, expect: [false, false] },
        {
          name: `${type} id tampered`,
          headers: { ...got.headers, 'webhook-id': `${got.headers['webhook-id']}x` },
          body: got.body,
          now: ts,
          expect: [false, true],
        },
        {
          name: `${type} timestamp tampered`,
          headers: { ...got.headers, 'webhook-timestamp': String(ts - 1) },
          body: got.body,
          now: ts,
          expect: [false, true],
        },
        { name: `${type} replayed 6 minutes later`, headers: got.headers, body: got.body, now: ts + 360, expect: [false, true] },
      ];
    });
    const script = [
      'import json, sys',
      `sys.path.insert(0, ${JSON.stringify(resolve(repoRoot, 'examples/webhook-verify'))})`,
      'from verify_webhook import verify_webhook, verify_service_signature',
      'out = []',
      'for c in json.load(sys.stdin):',
      '    body = c["body"].encode()',
      '    out.append([verify_webhook(c["secret"], c["headers"], body, now=c["now"]), verify_service_signature(c["secret"], c["headers"], body)])',
      'print(json.dumps(out))',
    ].join('\n');
    // Only the standard library: isolated mode (-I) ignores PYTHONPATH and the user's site-packages;
    // -B writes no __pycache__ into examples/.
    const child = execFile('python3', ['-I', '-B', '-c', script]);
    const output = new Promise<string>((resolveOut, reject) => {
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (d) => {
        stdout += d;
      });
      child.stderr?.on('data', (d) => {
        stderr += d;
      });
      child.on('exit', (code) => (code === 0 ? resolveOut(stdout) : reject(new Error(`python3 exited ${code}: ${stderr}`))));
    });
    child.stdin?.end(JSON.stringify(cases.map((c) => ({ secret: hookSecret, headers: c.headers, body: c.body, now: c.now }))));
    const results = JSON.parse(await output) as boolean[][];
    expect(Object.fromEntries(cases.map((c, i) => [c.name, results[i]]))).toEqual(Object.fromEntries(cases.map((c) => [c.name, c.expect])));
  });
});

describe('every live response of the webhook routes validates against its tightened schema', () => {
  it('the full lifecycle, the delivery log with its debugging fields, and the error answers', async () => {
    const check = (operation: string, answer: Answer, status: number) => {
      expect(answer.status, `${operation}: ${answer.text.slice(0, 300)}`).toBe(status);
      expectDocumented(operation, answer);
      return answer;
    };
    const hook = `/v1/webhooks/${hookId}`;
    check('GET /v1/webhooks', await call('/v1/webhooks?limit=5', { key: proKey }), 200);
    check('GET /v1/webhooks/{webhook_id}', await call(hook, { key: proKey }), 200);
    const log = check('GET /v1/webhooks/{webhook_id}/deliveries', await call(`${hook}/deliveries?limit=10`, { key: proKey }), 200);
    expect(log.body.data.map((d: { event_type: string }) => d.event_type).sort()).toEqual([...EVENT_TYPES].sort());
    for (const d of log.body.data) {
      expect(d.status).toBe('succeeded');
      const [a] = d.attempts;
      expect(a.request_headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
      expect(a.request_headers['webhook-signature']).toMatch(/^v1,/);
      expect(a.response_headers['x-receiver']).toBe('contract');
      expect(a.response_body).toBe(BIG_BODY.slice(0, 4096));
      expect(a.response_body_truncated).toBe(true);
    }
    const deliveryId = log.body.data[0].id as string;
    const retry = 'POST /v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry';
    check(retry, await call(`${hook}/deliveries/${deliveryId}/retry`, { method: 'POST', key: proKey }), 202);
    check(retry, await call(`${hook}/deliveries/dlv_00000000-0000-4000-8000-000000000000/retry`, { method: 'POST', key: proKey }), 404);
    check('POST /v1/webhooks/{webhook_id}/test', await call(`${hook}/test`, { method: 'POST', key: proKey }), 202);
    // The delivery log once the retried and the test delivery have their attempts too.
    const settled = await eventually(
      () => call(`${hook}/deliveries?limit=100`, { key: proKey }),
      (r) => r.status === 200 && r.body.data.every((d: { status: string }) => d.status !== 'pending'),
    );
    check('GET /v1/webhooks/{webhook_id}/deliveries', settled, 200);
    check(
      'POST /v1/webhooks/{webhook_id}/rotate-secret',
      await call(`${hook}/rotate-secret`, { method: 'POST', key: proKey, body: { overlap_seconds: 60 } }),
      200,
    );
    check(
      'PATCH /v1/webhooks/{webhook_id}',
      await call(hook, { method: 'PATCH', key: proKey, body: { events: ['case.new'], facility_ids: null } }),
      200,
    );
    check('PATCH /v1/webhooks/{webhook_id}', await call(hook, { method: 'PATCH', key: proKey, body: { events: ['nope'] } }), 400);
    check('PATCH /v1/webhooks/{webhook_id}', await call(hook, { method: 'PATCH', key: proKey, body: {} }), 400);
    check('POST /v1/webhooks', await call('/v1/webhooks', { method: 'POST', key: proKey, body: { url: 'ftp://x', events: [] } }), 400);
    check(
      'POST /v1/webhooks',
      await call('/v1/webhooks', { method: 'POST', key: freeKey, body: { url: 'https://example.com', events: ['case.new'] } }),
      403,
    );
    check('GET /v1/webhooks', await call('/v1/webhooks'), 401);
    check('GET /v1/webhooks/{webhook_id}', await call('/v1/webhooks/wh_00000000-0000-4000-8000-000000000000', { key: proKey }), 404);
    const other = check(
      'POST /v1/webhooks',
      await call('/v1/webhooks', {
        method: 'POST',
        key: proKey,
        body: { url: `https://127.0.0.1:${receiverPort}/other`, events: ['case.updated'] },
      }),
      201,
    );
    check('DELETE /v1/webhooks/{webhook_id}', await call(`/v1/webhooks/${other.body.data.id}`, { method: 'DELETE', key: proKey }), 204);
  }, 60_000);
});
