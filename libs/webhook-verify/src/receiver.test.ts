import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReceivedDelivery, verifyDelivery, webhookHandler } from './receiver.js';

const secret = 'whsec_receiverTestSecret0123456789abcdefABCDEF';
const body = JSON.stringify({ id: 'evt_1', type: 'violation.new', created_at: '2026-11-22T08:15:30.123Z', data: { violation: {} } });
const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

describe('verifyDelivery', () => {
  it('accepts the signature of the raw body under the secret, or under any of several (rotation)', () => {
    expect(verifyDelivery(secret, body, signature)).toBe(true);
    expect(verifyDelivery(['whsec_old0000000000000000000000000000000', secret], body, signature)).toBe(true);
  });

  it('refuses another secret, a changed body, a missing or malformed header', () => {
    expect(verifyDelivery(`${secret}x`, body, signature)).toBe(false);
    expect(verifyDelivery(secret, `${body} `, signature)).toBe(false);
    expect(verifyDelivery(secret, body, undefined)).toBe(false);
    expect(verifyDelivery(secret, body, signature.replace('sha256=', 'sha1='))).toBe(false);
    expect(verifyDelivery([], body, signature)).toBe(false);
  });
});

describe('webhookHandler', () => {
  let server: Server;
  let url = '';
  const received: ReceivedDelivery[] = [];
  beforeAll(async () => {
    server = createServer(webhookHandler({ secrets: secret, onDelivery: (d) => void received.push(d) }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('answers 204 to a signed delivery and hands over the parsed event', async () => {
    const res = await fetch(url, {
      method: 'POST',
      body,
      headers: { 'x-service-signature': signature, 'x-service-delivery-id': 'dlv_1', 'x-service-delivery-attempt': '2' },
    });
    expect(res.status).toBe(204);
    expect(received.at(-1)).toMatchObject({ event: JSON.parse(body), deliveryId: 'dlv_1', attempt: 2 });
  });

  it('answers 401 on a signature mismatch and does not call the handler', async () => {
    const before = received.length;
    const res = await fetch(url, { method: 'POST', body: `${body} `, headers: { 'x-service-signature': signature } });
    expect(res.status).toBe(401);
    const none = await fetch(url, { method: 'POST', body });
    expect(none.status).toBe(401);
    expect(received.length).toBe(before);
  });

  it('answers 405 to other methods', async () => {
    expect((await fetch(url)).status).toBe(405);
  });
});
