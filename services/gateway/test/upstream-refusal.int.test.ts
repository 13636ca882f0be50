import { createServer, type Server } from 'node:http';
import { type Stack, startStack, type TestAccount } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A domain service that refuses the gateway's signed account header (its INTERNAL_AUTH_SECRET
 * differs, or the request waited past the header's few seconds): the client's key was accepted, so
 * the gateway answers 503 with Retry-After, never the upstream's 401.
 */

let facility: Server;
let stack: Stack;
let pro: TestAccount;

beforeAll(async () => {
  facility = createServer((_req, res) => {
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { code: 'UNAUTHORIZED', message: 'A valid API key is required. Send it in the X-API-Key header.' } }));
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

describe('a domain service refusing the signed account header', () => {
  it('gives the client 503 SERVICE_UNAVAILABLE with Retry-After, not 401', async () => {
    const res = await fetch(`${stack.gatewayUrls[0]}/v1/facilities`, { headers: { 'x-api-key': pro.apiKey } });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('x-ratelimit-limit')).toBe('25000');
    expect(((await res.json()) as { error: { code: string; details: unknown } }).error).toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
      details: { dependency: 'facility' },
    });
  });
});
