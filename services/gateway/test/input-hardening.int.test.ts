import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { type ApiStack, startApiStack, type TestAccount } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import document from '../src/openapi/openapi.json';
import { PUBLIC_ROUTES } from '../src/routes/table';

/**
 * Inputs that once gave 500 (or escaped the envelope), through the gateway and
 * the real usage, facility and webhook services: every one is a 4xx envelope
 * with an X-Request-Id.
 */

const FACILITY = '11111111-1111-4111-8111-111111111111';
const WEBHOOK = 'wh_11111111-1111-4111-8111-111111111111';
const DELIVERY = 'dlv_11111111-1111-4111-8111-111111111111';

let stack: ApiStack;
let pro: TestAccount;
let free: TestAccount;

beforeAll(async () => {
  stack = await startApiStack({
    label: 'input_hardening',
    webhookSecretKey: randomBytes(32).toString('base64'),
    gatewayEnv: { AUTH_DEADLINE_MS: '10000' },
  });
  [pro, free] = await Promise.all([stack.createAccount('pro'), stack.createAccount('free')]);
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

/** A route's path with its parameters filled. */
function concrete(path: string): string {
  return path
    .replace(':facility_id', FACILITY)
    .replace(':case_id', FACILITY)
    .replace(':webhook_id', WEBHOOK)
    .replace(':delivery_id', DELIVERY)
    .replace(/:[a-z_]+/g, FACILITY);
}

async function call(path: string, key: string, init: { method?: string; body?: string } = {}) {
  const res = await fetch(`${stack.gateway}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': key, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body,
  });
  const text = await res.text();
  return { status: res.status, requestId: res.headers.get('x-request-id'), body: text ? JSON.parse(text) : undefined };
}

/** The list endpoints: GET operations of the OpenAPI document with a `limit` parameter (new lists join by themselves). */
const LIST_PATHS = Object.entries(document.paths as Record<string, { get?: { parameters?: Array<{ name: string }> } }>)
  .filter(([, item]) => item.get?.parameters?.some((p) => p.name === 'limit'))
  .map(([path]) => path.replace(/\{([^}]+)\}/g, ':$1'));

describe('numbers in query strings', () => {
  it('finds the list endpoints in the OpenAPI document', () => {
    expect(LIST_PATHS).toEqual(
      expect.arrayContaining([
        '/v1/facilities',
        '/v1/facilities/:facility_id/violations',
        '/v1/facilities/:facility_id/cases',
        '/v1/violations',
        '/v1/cases',
        '/v1/webhooks',
        '/v1/webhooks/:webhook_id/deliveries',
      ]),
    );
  });

  it.each(['Infinity', '-Infinity', '1e400', '0x10', '1.5'])(
    'refuses limit=%s on every list endpoint with 400 naming limit',
    async (text) => {
      for (const path of LIST_PATHS) {
        const res = await call(`${concrete(path)}?limit=${encodeURIComponent(text)}`, pro.apiKey);
        expect({ path, status: res.status }).toEqual({ path, status: 400 });
        expect(res.requestId).toMatch(/^req_/);
        expect(res.body.error.code).toBe('VALIDATION_ERROR');
        expect(res.body.error.details.fields).toEqual([expect.objectContaining({ field: 'limit' })]);
      }
    },
  );
});

describe('dates in query strings', () => {
  it.each(['/v1/violations', '/v1/cases', `/v1/facilities/${FACILITY}/violations`, `/v1/facilities/${FACILITY}/cases`])(
    'refuses since=0000-01-01 on %s with 400 naming since, and accepts 0001-01-01',
    async (path) => {
      const res = await call(`${path}?since=0000-01-01`, pro.apiKey);
      expect(res.status).toBe(400);
      expect(res.body.error).toEqual({
        code: 'VALIDATION_ERROR',
        message: 'Invalid request: since: must be a date from 0001-01-01 to 9999-12-31',
        details: { fields: [{ field: 'since', message: 'must be a date from 0001-01-01 to 9999-12-31' }] },
      });
      const earliest = await call(`${path}?since=0001-01-01`, pro.apiKey);
      expect(earliest.status).toBe(path.includes(FACILITY) ? 404 : 200);
    },
  );
});

describe('deeply nested JSON', () => {
  const deep = `{"url":${'['.repeat(5000)}${']'.repeat(5000)}}`;
  const posts = PUBLIC_ROUTES.filter((r) => r.methods.includes('POST') || r.methods.includes('PATCH'));

  it('is a 30 KB body under the body limit', () => {
    expect(deep.length).toBeGreaterThan(10_000);
    expect(deep.length).toBeLessThan(64 * 1024);
  });

  it('gives a Pro key 400 BAD_REQUEST on every proxied POST and PATCH', async () => {
    for (const route of posts) {
      for (const method of route.methods.filter((m) => m === 'POST' || m === 'PATCH')) {
        const res = await call(concrete(route.path), pro.apiKey, { method, body: deep });
        expect({ route: route.path, method, status: res.status }).toEqual({ route: route.path, method, status: 400 });
        expect(res.body.error).toEqual({ code: 'BAD_REQUEST', message: 'The request body nests arrays or objects deeper than 32 levels.' });
        expect(res.requestId).toMatch(/^req_/);
      }
    }
  });

  it('gives a Free key 403 FORBIDDEN on the webhook routes, whatever the body', async () => {
    for (const route of posts.filter((r) => r.path.startsWith('/v1/webhooks'))) {
      const res = await call(concrete(route.path), free.apiKey, { method: route.methods.includes('POST') ? 'POST' : 'PATCH', body: deep });
      expect({ route: route.path, status: res.status }).toEqual({ route: route.path, status: 403 });
      expect(res.body.error.code).toBe('FORBIDDEN');
    }
  });
});

describe('the Pro gate', () => {
  const paths = [
    '/v1/webhooks',
    `/v1/webhooks/${WEBHOOK}`,
    `/v1/webhooks/${WEBHOOK}/deliveries`,
    `/v1/webhooks/${WEBHOOK}/deliveries/${DELIVERY}/retry`,
    `/v1/webhooks/${WEBHOOK}/test`,
    `/v1/webhooks/${WEBHOOK}/rotate-secret`,
    `/v1/webhooks/${WEBHOOK}/no-such-thing`,
    '/v1/webhooks/a/b/c/d',
    '/v1/webhooks?limit=Infinity',
  ];
  const methods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

  it('answers a Free key 403 on every webhook path and method, unknown sub-paths and wrong methods included', async () => {
    for (const path of paths) {
      for (const method of methods) {
        const res = await fetch(`${stack.gateway}${path}`, { method, headers: { 'x-api-key': free.apiKey } });
        const text = await res.text();
        expect({ path, method, status: res.status }).toEqual({ path, method, status: 403 });
        expect(res.headers.get('x-request-id')).toMatch(/^req_/);
        if (method !== 'HEAD') {
          expect(JSON.parse(text).error).toEqual({
            code: 'FORBIDDEN',
            message: 'Webhooks are available on the Pro tier and above. Upgrade the account to use them.',
            details: { required_tier: 'pro', tier: 'free' },
          });
        }
      }
    }
  });

  it('lets a Pro key through to 404 and 405 as before', async () => {
    expect((await call(`/v1/webhooks/${WEBHOOK}/no-such-thing`, pro.apiKey)).status).toBe(404);
    expect((await call('/v1/webhooks', pro.apiKey, { method: 'PUT' })).status).toBe(405);
  });
});

/** Sends raw bytes and returns the status line, the X-Request-Id and the body of the answer. */
function rawRequest(url: string, bytes: string): Promise<{ status: number; requestId: string | undefined; body: unknown }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => {
      data += c;
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', body = ''] = data.split('\r\n\r\n');
      resolve({
        status: Number(head.split(' ')[1]),
        requestId: /\r\nx-request-id: ([^\r]+)/i.exec(head)?.[1],
        body: body ? JSON.parse(body) : undefined,
      });
    });
    socket.write(bytes, 'latin1');
  });
}

describe('errors Node raises before routing, on every service', () => {
  const cases: Array<[string, string, number, string]> = [
    ['CL+TE', 'POST /v1/webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}', 400, 'BAD_REQUEST'],
    [
      'double Content-Length',
      'POST /v1/webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}',
      400,
      'BAD_REQUEST',
    ],
    ['CR in a header', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n', 400, 'BAD_REQUEST'],
    ['LF in a header', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A\n: b\r\n\r\n', 400, 'BAD_REQUEST'],
    ['NUL in a header', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n', 400, 'BAD_REQUEST'],
    ['431', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'HEADERS_TOO_LARGE'],
  ];

  it.each(cases)('%s', async (_name, bytes, status, code) => {
    const metricsPorts = [stack.gateways[0], stack.usage, stack.facility, stack.webhook].map(
      (p) => `http://127.0.0.1:${p?.logs().find((l) => l.msg === 'ready')?.metricsPort}`,
    );
    const usagePort = stack.usage.logs().find((l) => l.msg === 'ready')?.port;
    for (const url of [stack.gateway, `http://127.0.0.1:${usagePort}`, stack.facilityUrl, stack.webhookUrl, ...metricsPorts]) {
      const res = await rawRequest(url, bytes);
      expect({ url, status: res.status }).toEqual({ url, status });
      expect(res.requestId).toMatch(/^req_[0-9a-f-]{36}$/);
      expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
    }
  });
});
