import { createServer, type Server } from 'node:http';
import { type Stack, startStack, type TestAccount } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A domain service that refuses the gateway's signed account header (its INTERNAL_AUTH_SECRET
 * differs, or the request waited past the header's few seconds), or answers 408 (it did not read
 * the gateway's request in time): the client's key and request were accepted, so the gateway
 * answers 503 with Retry-After, never the upstream's 401 or 408.
 */

let facility: Server;
let stack: Stack;
let pro: TestAccount;

beforeAll(async () => {
  facility = createServer((req, res) => {
    if (req.url?.startsWith('/v1/facilities')) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { code: 'UNAUTHORIZED', message: 'A valid API key is required. Send it in the X-API-Key header.' } }),
      );
      return;
    }
    // As Node's servers answer a request not read in time (service-kit's answerClientError).
    res.writeHead(408, { 'content-type': 'application/json', connection: 'close' });
    res.end(JSON.stringify({ error: { code: 'REQUEST_TIMEOUT', message: 'The request was not received in time.' } }));
  });
  await new Promise<void>((r) => facility.listen(0, '127.0.0.1', r));
  const { port } = facility.address() as { port: number };
  stack = await startStack({ label: 'upstream_refusal', facilityUrl: `http://127.0.0.1:${port}` });
  pro = await stack.createAccount('pro');
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await new Promise((r) => facility?.close(r));
});

/** Asserts the client's 503 and returns its headers. */
async function expectUnavailable(path: string): Promise<Headers> {
  const res = await fetch(`${stack.gatewayUrls[0]}${path}`, { headers: { 'x-api-key': pro.apiKey } });
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe('1');
  expect(((await res.json()) as { error: { code: string; details: unknown } }).error).toMatchObject({
    code: 'SERVICE_UNAVAILABLE',
    details: { dependency: 'facility' },
  });
  return res.headers;
}

/** The gateway's error line for the upstream's answer to that request. */
async function expectLogged(headers: Headers, msg: string, status: number): Promise<void> {
  const requestId = headers.get('x-request-id');
  const line = await stack.gateways[0]?.waitForLog((l) => l.request_id === requestId && l.msg === msg, 5_000);
  expect(line).toMatchObject({ level: 'error', upstream: 'facility', status });
}

describe('a domain service answering 408 to the gateway', () => {
  it('gives the client 503 SERVICE_UNAVAILABLE with Retry-After, not 408, on the proxied path and an export', async () => {
    const late = 'upstream did not read the request in time';
    await expectLogged(await expectUnavailable('/v1/violations'), late, 408);
    await expectLogged(await expectUnavailable('/v1/exports/facilities'), late, 408);
  });
});

describe('a domain service refusing the signed account header', () => {
  it('gives the client 503 SERVICE_UNAVAILABLE with Retry-After, not 401', async () => {
    const headers = await expectUnavailable('/v1/facilities');
    expect(headers.get('x-ratelimit-limit')).toBe('25000');
    await expectLogged(headers, 'upstream refused the signed account header', 401);
  });
});
