import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import { eventually, logCapture, testUrls, uniqueName } from '@fcd/testing';
import { DeliveryStore, type DeliveryView } from '@fcd/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { Dispatcher } from '../src/delivery/dispatcher';
import { boundHeaders, Sender } from '../src/delivery/sender';
import {
  type Bus,
  openBus,
  SECRET_KEY,
  secretBox,
  setupDb,
  subscribe,
  type TestDb,
  teardownDb,
  testCertificate,
  violationEvent,
} from './helpers';

/**
 * Attempt debugging (ADR 0003, docs/webhooks.md "Deliveries"): each attempt in the delivery log keeps the request headers
 * sent, the response headers, the first 4 KiB of the response body with a truncated flag, and
 * DNS, connect, TLS and first-byte timings. Against a real HTTPS receiver (a test certificate for
 * 127.0.0.1 and receiver.test, which an injected resolver maps to 127.0.0.1), through the Sender
 * alone and through the dispatcher (JetStream → Postgres → the view the webhook API returns).
 */

const BIG = 'b'.repeat(5000);
const EXACT = 'e'.repeat(4096);
let cert: ReturnType<typeof testCertificate>;
let server: Server;
let port = 0;
/** The paths of the requests the receiver got, and the TLS connections it accepted. */
const received: string[] = [];
let connections = 0;

/** What the receiver answers per path. */
function answer(path: string, res: import('node:http').ServerResponse): void {
  if (path.startsWith('/big')) {
    res
      .writeHead(200, {
        'content-type': 'text/plain',
        'x-receiver': 'big',
        'set-cookie': ['a=1', 'b=2'],
        'WWW-Authenticate': 'Bearer realm="receiver-realm"',
        authorization: 'Bearer receiver-token',
      })
      .end(BIG);
  } else if (path.startsWith('/exact')) {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(EXACT);
  } else if (path.startsWith('/binary')) {
    res.writeHead(500, { 'content-type': 'application/octet-stream' }).end(Buffer.from([0x6f, 0x6b, 0x00, 0xff, 0x21]));
  } else if (path.startsWith('/headers')) {
    const many: Record<string, string> = {};
    for (let i = 0; i < 12; i++) many[`x-filler-${String(i).padStart(2, '0')}`] = 'h'.repeat(1000);
    res.writeHead(200, many).end('small');
  } else {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  }
}

const resolver = async (hostname: string) => (hostname === 'receiver.test' ? [{ address: '127.0.0.1', family: 4 as const }] : []);

/** One connection per origin when a test needs the second request on the first one's connection. */
function newSender(connectionsPerOrigin = 32): Sender {
  return new Sender({
    connectTimeoutMs: 2000,
    timeoutMs: 5000,
    allowPrivate: true,
    resolver,
    tls: { ca: cert.cert },
    connectionsPerOrigin,
  });
}

const SENT_HEADERS = {
  'content-type': 'application/json',
  'x-service-signature': `sha256=${'a'.repeat(64)}`,
  'webhook-signature': `v1,${'b'.repeat(43)}=`,
};

beforeAll(async () => {
  cert = testCertificate(['receiver.test']);
  server = createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    received.push(req.url ?? '/');
    req.resume();
    req.on('end', () => answer(req.url ?? '/', res));
  });
  server.on('secureConnection', () => {
    connections++;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
});

describe('the sender keeps what the delivery log shows', () => {
  it('the headers sent, the response headers, the first 4 KiB of a longer body (truncated), and DNS, connect, TLS and first-byte timings', async () => {
    const sender = newSender();
    try {
      const r = await sender.send(`https://receiver.test:${port}/big`, '{"id":"evt_1"}', SENT_HEADERS);
      expect(r).toMatchObject({ status: 200, success: true, error: null, responseBodyTruncated: true, responseHeadersTruncated: false });
      expect(r.requestHeaders).toEqual(SENT_HEADERS);
      expect(r.responseHeaders).toMatchObject({ 'content-type': 'text/plain', 'x-receiver': 'big', 'set-cookie': 'a=1, b=2' });
      expect(r.responseBody).toBe(BIG.slice(0, 4096));
      const t = r.timings;
      expect(t.connectionReused).toBe(false);
      // A host name is looked up (the injected resolver), and the receiver speaks TLS.
      for (const phase of [t.dnsMs, t.connectMs, t.tlsMs, t.firstByteMs]) {
        expect(phase).toEqual(expect.any(Number));
        expect(phase as number).toBeGreaterThanOrEqual(0);
      }
      expect(t.tlsMs as number).toBeGreaterThan(0);
    } finally {
      await sender.close();
    }
  });

  it('a body of exactly 4 KiB is whole (not truncated); a request on a kept-alive connection has no DNS, connect or TLS step', async () => {
    // With more connections allowed, undici may open a second one for a request sent as the first ends.
    const sender = newSender(1);
    try {
      const first = await sender.send(`https://127.0.0.1:${port}/exact`, '{}', SENT_HEADERS);
      expect(first.responseBody).toBe(EXACT);
      expect(first.responseBodyTruncated).toBe(false);
      // An IP address is not looked up: DNS took no time.
      expect(first.timings).toMatchObject({ dnsMs: 0, connectionReused: false });
      expect(first.timings.tlsMs).toEqual(expect.any(Number));
      const second = await sender.send(`https://127.0.0.1:${port}/small`, '{}', SENT_HEADERS);
      expect(second.responseBody).toBe('ok');
      expect(second.timings).toEqual({
        dnsMs: null,
        connectMs: null,
        tlsMs: null,
        firstByteMs: expect.any(Number),
        connectionReused: true,
      });
      expect(second.timings.firstByteMs as number).toBeGreaterThanOrEqual(0);
    } finally {
      await sender.close();
    }
  });

  it('a start gate closed when the connection is up: nothing is written (late_start), and the connection serves the next send', async () => {
    const sender = newSender(1);
    const path = `/gate-${randomUUID()}`;
    const connectionsBefore = connections;
    let asked = 0;
    try {
      const stopped = await sender.send(`https://127.0.0.1:${port}${path}`, '{}', SENT_HEADERS, () => {
        asked++;
        return false;
      });
      expect(stopped).toMatchObject({ status: null, success: false, kind: 'late_start', permanent: false, responseBody: null });
      expect(asked).toBe(1);
      const sent = await sender.send(`https://127.0.0.1:${port}${path}`, '{}', SENT_HEADERS, () => true);
      expect(sent).toMatchObject({ status: 200, success: true, kind: null });
      // The gate was asked with the connection up (one TLS connection, made for the first send and kept).
      expect(sent.timings.connectionReused).toBe(true);
      expect(connections - connectionsBefore).toBe(1);
      expect(received.filter((p) => p === path)).toEqual([path]);
    } finally {
      await sender.close();
    }
  });

  it('invalid UTF-8 and NUL bytes of a body are shown as U+FFFD; response headers over 8 KiB are cut and flagged', async () => {
    const sender = newSender();
    try {
      const binary = await sender.send(`https://127.0.0.1:${port}/binary`, '{}', SENT_HEADERS);
      expect(binary).toMatchObject({ status: 500, success: false, responseBody: 'ok\uFFFD\uFFFD!', responseBodyTruncated: false });
      const headers = await sender.send(`https://127.0.0.1:${port}/headers`, '{}', SENT_HEADERS);
      expect(headers.responseHeadersTruncated).toBe(true);
      const kept = Object.entries(headers.responseHeaders ?? {});
      expect(kept.reduce((n, [k, v]) => n + k.length + v.length, 0)).toBeLessThanOrEqual(8192);
      expect(Object.keys(headers.responseHeaders ?? {})).toContain('x-filler-00');
      expect(Object.keys(headers.responseHeaders ?? {})).not.toContain('x-filler-11');
    } finally {
      await sender.close();
    }
  });

  it('no response: headers, body and first byte are null; the headers sent are still kept', async () => {
    const sender = newSender();
    try {
      const refused = await sender.send('https://nowhere.test/hook', '{}', SENT_HEADERS);
      expect(refused).toMatchObject({
        status: null,
        success: false,
        responseHeaders: null,
        responseBody: null,
        responseBodyTruncated: false,
      });
      expect(refused.requestHeaders).toEqual(SENT_HEADERS);
      expect(refused.timings.firstByteMs).toBeNull();
      expect(refused.timings.connectMs).toBeNull();
    } finally {
      await sender.close();
    }
  });

  it('boundHeaders keeps headers in order up to the byte limit and joins repeated ones', () => {
    expect(boundHeaders({ A: '1', 'set-cookie': ['x', 'y'], big: 'z'.repeat(20), after: '2' }, 22)).toEqual({
      headers: { a: '1', 'set-cookie': 'x, y', after: '2' },
      truncated: true,
    });
  });
});

describe('the dispatcher records it in the delivery log', () => {
  let db: TestDb;
  let bus: Bus;
  let dispatcher: Dispatcher;
  const { lines, logger } = logCapture('dispatcher-test', 'debug');
  const stream = uniqueName('DISP_DEBUG').toUpperCase();

  beforeAll(async () => {
    db = await setupDb('dispatcher_attempt_debug');
    bus = await openBus(stream);
    const config = loadConfig({
      DATABASE_URL: db.database.url,
      NATS_URL: testUrls.nats,
      EVENTS_STREAM: stream,
      EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
      DISPATCHER_CONSUMER: 'attempt_debug',
      WEBHOOK_SECRET_KEY: SECRET_KEY,
      WEBHOOK_RETRY_SCHEDULE: '60s',
      WEBHOOK_TIMEOUT_MS: '3000',
      WEBHOOK_CONNECT_TIMEOUT_MS: '2000',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      DISPATCHER_POLL_MS: '100',
    });
    dispatcher = new Dispatcher({ config, pool: db.pool, secretBox, logger, tls: { ca: cert.cert }, resolver });
    dispatcher.start();
    await eventually(
      () =>
        dispatcher.consumer.check().then(
          () => true,
          () => false,
        ),
      (ok) => ok,
    );
  });

  afterAll(async () => {
    await dispatcher?.stop();
    await bus?.close();
    await teardownDb(db);
  });

  it('each attempt shows the headers sent (signatures included), the response headers, 4 KiB of the body, truncated, and the timings; the log lines carry none of it', async () => {
    const facility = randomUUID();
    const sub = await subscribe(db, { url: `https://receiver.test:${port}/big/${randomUUID()}`, facility_ids: [facility] });
    const event = violationEvent(facility);
    await bus.publish(event);
    const store = new DeliveryStore(db.pool);
    const page = await eventually(
      () => store.list(sub.id, 10),
      (p) => p.items[0]?.status === 'succeeded',
    );
    const delivery = page.items[0] as DeliveryView;
    expect(delivery.attempts).toHaveLength(1);
    const [a] = delivery.attempts;
    if (!a) throw new Error('no attempt');
    expect(a).toMatchObject({ attempt: 1, response_status: 200, error: null, outcome: 'success' });
    expect(a.request_headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'FacilityCompliance-Webhooks/1.0',
      'x-service-event-id': event.id,
      'x-service-event-type': 'violation.new',
      'x-service-delivery-id': delivery.id,
      'x-service-delivery-attempt': '1',
      'webhook-id': event.id,
    });
    expect(a.request_headers?.['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(a.request_headers?.['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    // Credentials are never stored: the names stay, the values are redacted.
    expect(a.response_headers).toMatchObject({
      'x-receiver': 'big',
      'content-type': 'text/plain',
      'set-cookie': '[redacted]',
      'www-authenticate': '[redacted]',
      authorization: '[redacted]',
    });
    const stored = await db.pool.query<{ h: string }>(
      'SELECT request_headers::text || response_headers::text AS h FROM webhook.delivery_attempts WHERE delivery_id = $1',
      [delivery.id],
    );
    expect(stored.rows).toHaveLength(1);
    for (const secret of ['a=1', 'b=2', 'receiver-realm', 'receiver-token']) expect(stored.rows[0]?.h).not.toContain(secret);
    expect(a.response_headers_truncated).toBe(false);
    expect(a.response_body).toBe(BIG.slice(0, 4096));
    expect(a.response_body_truncated).toBe(true);
    expect(a.timings.connection_reused).toBe(false);
    for (const phase of ['dns_ms', 'connect_ms', 'tls_ms', 'first_byte_ms'] as const) {
      expect(a.timings[phase], phase).toEqual(expect.any(Number));
      expect(a.timings[phase] as number, phase).toBeGreaterThanOrEqual(0);
    }
    expect(a.latency_ms).toEqual(expect.any(Number));

    // Logged, but without the headers, the signatures, the body or the secret.
    await eventually(
      async () => lines.filter((l) => l.includes(delivery.id)),
      (l) => l.some((x) => x.includes('"msg":"delivered"')),
    );
    const all = lines.join('');
    expect(all).not.toContain(a.request_headers?.['x-service-signature'] as string);
    expect(all).not.toContain(String(a.request_headers?.['webhook-signature']).slice(3));
    expect(all).not.toContain(sub.secret);
    expect(all).not.toContain(BIG.slice(0, 64));
  });
});
