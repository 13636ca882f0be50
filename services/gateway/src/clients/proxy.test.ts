import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError, createLogger } from '@fcd/service-kit';
import { logCapture } from '@fcd/testing';
import type { FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { readWhole, Upstream } from './proxy';

// The upstream timeouts with a real HTTP server on loopback (UPSTREAM_TIMEOUT_MS is at least 100 ms).
const TIMEOUT_MS = 300;
const request = {
  id: 'req_test',
  method: 'GET',
  url: '/v1/things',
  body: undefined,
  log: createLogger({ service: 'proxy-test', level: 'silent' }),
} as unknown as FastifyRequest;

let server: Server | undefined;
let upstream: Upstream | undefined;
/** Requests the upstream sent once more (its `onResend`). */
let resent = 0;
const timers = new Set<NodeJS.Timeout>();

afterEach(async () => {
  resent = 0;
  for (const t of timers) clearInterval(t);
  timers.clear();
  await upstream?.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = undefined;
  upstream = undefined;
});

async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  connections = 4,
  timeoutMs = TIMEOUT_MS,
): Promise<Upstream> {
  server = createServer(handler);
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  upstream = new Upstream('facility', `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs, connections, () => {
    resent++;
  });
  return upstream;
}

/** Headers at once, then the body one byte every `everyMs`, `bytes` bytes in all. */
function trickle(res: ServerResponse, bytes: number, everyMs: number): void {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(bytes) });
  let sent = 0;
  const t = setInterval(() => {
    res.write('x');
    if (++sent === bytes) {
      clearInterval(t);
      res.end();
    }
  }, everyMs);
  timers.add(t);
}

/**
 * A handler that notes each request (`METHOD url` in `arrived`), cuts the first one's connection
 * with `cut` (a destroy by default) and answers the later ones with `answer`.
 */
function cutFirst(
  arrived: string[],
  answer: (res: ServerResponse) => void,
  cut: (req: IncomingMessage) => void = (req) => req.socket.destroy(),
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    arrived.push(`${req.method} ${req.url}`);
    if (arrived.length === 1) cut(req);
    else answer(res);
  };
}

async function refusal(call: Promise<unknown>): Promise<AppError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return err as AppError;
}

describe('Upstream timeouts', () => {
  it('answers 503 when the upstream sends no headers within the timeout', async () => {
    const u = await serve(() => {
      // never answers
    });
    const started = Date.now();
    const err = await refusal(u.call(request, 'signed'));
    expect(err.status).toBe(503);
    expect(err.details).toEqual({ dependency: 'facility' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
  });

  it('answers 503 when the body falls silent for the timeout', async () => {
    const u = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"partial":');
    });
    const err = await refusal(u.call(request, 'signed'));
    expect(err.status).toBe(503);
  });

  it('reads a body whose silences are each shorter than the timeout, however long it takes in all', async () => {
    // 12 bytes, one every 60 ms: about 720 ms in all, more than twice the timeout.
    const u = await serve((_req, res) => trickle(res, 12, 60));
    const started = Date.now();
    const answer = await u.call(request, 'signed');
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe('x'.repeat(12));
    expect(Date.now() - started).toBeGreaterThan(TIMEOUT_MS);
  });

  it('ends a write (an idempotent POST among them) at the timeout in total, the same trickling body included', async () => {
    const u = await serve((_req, res) => trickle(res, 12, 60));
    const started = Date.now();
    const err = await refusal(u.call(request, 'signed', 'POST'));
    expect(err.status).toBe(503);
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(took).toBeLessThan(12 * 60);
  });
});

describe('Upstream answers', () => {
  it('reads a body sent in many chunks whole, with the status and only the headers passed on', async () => {
    const u = await serve((_req, res) => {
      res.writeHead(201, {
        'content-type': 'application/json',
        location: '/v1/things/1',
        'x-internal': 'kept back',
        'set-cookie': ['a=1'],
      });
      // Chunked transfer, each write its own chunk.
      for (let i = 0; i < 50; i++) res.write(`${i},`);
      res.end('end');
    });
    const answer = await u.call(request, 'signed');
    expect(answer.status).toBe(201);
    expect(answer.headers).toEqual({ 'content-type': 'application/json', location: '/v1/things/1' });
    expect(answer.body.toString()).toBe(`${Array.from({ length: 50 }, (_, i) => `${i},`).join('')}end`);
  });

  it('sends the signed header, the request id and a JSON body, and reads an empty answer', async () => {
    let seen: { method?: string; url?: string; headers?: IncomingMessage['headers']; body?: string } = {};
    const u = await serve((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        seen = { method: req.method, url: req.url, headers: req.headers, body };
        res.writeHead(204).end();
      });
    });
    const post = { ...request, method: 'POST', url: '/v1/things?x=1', body: { name: 'a' } } as unknown as FastifyRequest;
    const answer = await u.call(post, 'signed-header', 'POST');
    expect(answer).toEqual({ status: 204, headers: {}, body: Buffer.alloc(0) });
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/v1/things?x=1');
    expect(seen.body).toBe('{"name":"a"}');
    expect(seen.headers?.['x-fcd-account']).toBe('signed-header');
    expect(seen.headers?.['x-request-id']).toBe('req_test');
    expect(seen.headers?.['content-type']).toBe('application/json');
  });

  it('reads a body that comes in one piece', async () => {
    const u = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '7' });
      res.end('{"a":1}');
    });
    const answer = await u.call(request, 'signed');
    expect(answer).toEqual({ status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"a":1}') });
  });

  it('passes on the answer after an informational one, not the early hints', async () => {
    const u = await serve((_req, res) => {
      res.writeEarlyHints({ link: '</hint.css>; rel=preload' });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"b":2}');
    });
    const answer = await u.call(request, 'signed');
    expect(answer).toEqual({ status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"b":2}') });
  });

  it('answers 503 when the connection is cut part-way through the body, without logging the upstream down', async () => {
    // Not sent again: part of the answer came already (a second answer would be glued to it).
    let arrived = 0;
    const u = await serve((_req, res) => {
      arrived++;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write(arrived === 1 ? '{"partial":' : '1}', () => res.socket?.destroy());
    });
    const logged = capturingRequest();
    const err = await refusal(u.call(logged.request, 'signed'));
    expect(err.status).toBe(503);
    expect(arrived).toBe(1);
    expect(resent).toBe(0);
    expect(err.details).toEqual({ dependency: 'facility' });
    expect(logged.lines).toEqual([]);
  });

  it.each([
    ['closed (FIN)', (req: IncomingMessage) => req.socket.end()],
    ['destroyed', (req: IncomingMessage) => req.socket.destroy()],
    ['reset (RST)', (req: IncomingMessage) => req.socket.resetAndDestroy()],
  ])('sends a read once more when its connection is %s before any byte of the answer', async (_how, cut) => {
    const arrived: string[] = [];
    const u = await serve(cutFirst(arrived, (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"a":1}'), cut));
    const logged = capturingRequest();
    const answer = await u.call(logged.request, 'signed');
    expect(answer).toEqual({ status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"a":1}') });
    expect(arrived).toEqual(['GET /v1/things', 'GET /v1/things']);
    expect(logged.lines).toEqual([]);
    expect(resent).toBe(1);
  });

  it('sends it on a new connection when the replica closes its idle ones at the same time', async () => {
    // Two keep-alive connections: a slow read holds the first while the next read goes out on the
    // second. Then the replica leaves: it answers the slow read, resets the second connection and
    // closes the first, now idle, at once. The read goes out again on a new connection (another
    // replica, behind a Service), not on the first one, closed as well. (In one process undici
    // sees that close before it reuses the connection whenever the resend is made; across
    // processes the turn of I/O before the resend lets it; see readAnswer in proxy.ts.)
    const arrived: string[] = [];
    let slow: ServerResponse | undefined;
    const u = await serve((req, res) => {
      arrived.push(`${req.method} ${req.url}`);
      if (req.url === '/v1/slow') slow = res;
      else if (req.url === '/v1/things' && slow) {
        slow.writeHead(200, { 'content-type': 'application/json' }).end('{"slow":1}');
        slow = undefined;
        setTimeout(() => {
          req.socket.destroy();
          server?.closeIdleConnections();
        }, 20);
      } else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    }, 2);
    const warm = { ...request, url: '/v1/warm' } as unknown as FastifyRequest;
    await Promise.all([u.call(warm, 'signed'), u.call(warm, 'signed')]);
    const held = u.call({ ...request, url: '/v1/slow' } as unknown as FastifyRequest, 'signed');
    await new Promise((r) => setTimeout(r, 20));
    const answer = await u.call(request, 'signed');
    expect((await held).body.toString()).toBe('{"slow":1}');
    expect(answer).toEqual({ status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') });
    expect(arrived.slice(2)).toEqual(['GET /v1/slow', 'GET /v1/things', 'GET /v1/things']);
    expect(resent).toBe(1);
  });

  it('does not send a read once more when its connection is reset a second or more after the call began', async () => {
    // A replica failing mid-request, not the rollout's race: the signed header could expire.
    let arrived = 0;
    const u = await serve(
      (req) => {
        arrived++;
        setTimeout(() => req.socket.destroy(), 1100);
      },
      4,
      3000,
    );
    const err = await refusal(u.call(request, 'signed'));
    expect(err.status).toBe(503);
    expect(arrived).toBe(1);
    expect(resent).toBe(0);
  });

  it('does not send a write once more: the upstream may have run it', async () => {
    const arrived: string[] = [];
    const u = await serve(cutFirst(arrived, (res) => res.writeHead(204).end()));
    const err = await refusal(u.call(request, 'signed', 'POST'));
    expect(err.status).toBe(503);
    expect(arrived).toEqual(['POST /v1/things']);
    expect(resent).toBe(0);
  });

  it('sends an export page once more when its connection closes before the answer', async () => {
    const arrived: string[] = [];
    const u = await serve(
      cutFirst(arrived, (res) => res.writeHead(200, { 'content-type': 'application/x-ndjson', 'x-export-next': 'c2' }).end('{"a":1}\n')),
    );
    const page = await u.getInternal('/internal/exports/facilities', 'signed', 'req_test', request.log);
    expect(page.status).toBe(200);
    expect(page.headers).toEqual({ 'content-type': 'application/x-ndjson', 'x-export-next': 'c2' });
    expect((await readWhole(page.body)).toString()).toBe('{"a":1}\n');
    expect(arrived).toEqual(['GET /internal/exports/facilities', 'GET /internal/exports/facilities']);
    expect(resent).toBe(1);
  });

  it('answers 503 and logs the upstream unavailable when it closes the connection without an answer, twice', async () => {
    let arrived = 0;
    const u = await serve((req) => {
      arrived++;
      req.socket.destroy();
    });
    const logged = capturingRequest();
    const err = await refusal(u.call(logged.request, 'signed-secret-header'));
    expect(err.status).toBe(503);
    expect(err.details).toEqual({ dependency: 'facility' });
    expect(arrived).toBe(2);
    expect(resent).toBe(1);
    expect(logged.lines).toEqual([['warn', 'upstream unavailable', 'facility']]);
    // The signed account header is a credential: it never reaches a log line.
    expect(logged.raw.join('')).not.toContain('signed-secret-header');
  });

  it('ends a write waiting for a connection at the timeout, not when the connection frees up', async () => {
    // One connection, held by a read that takes 12 × 60 ms: the write queued behind it gives up
    // at its own timeout, long before it could start.
    const arrived: string[] = [];
    const u = await serve((req, res) => {
      arrived.push(`${req.method} ${req.url}`);
      if (req.url === '/v1/quick') res.writeHead(204).end();
      else if (req.method === 'GET') trickle(res, 12, 60);
      else res.writeHead(204).end();
    }, 1);
    const read = u.call(request, 'signed');
    const started = Date.now();
    const err = await refusal(u.call(request, 'signed', 'POST'));
    const took = Date.now() - started;
    expect(err.status).toBe(503);
    expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(took).toBeLessThan(12 * 60 - 100);
    expect((await read).body.toString()).toBe('x'.repeat(12));
    // The given-up write is dropped when the connection frees up, before it is sent: the next
    // request on the one connection is the first to arrive after the read.
    expect((await u.call({ ...request, url: '/v1/quick' } as unknown as FastifyRequest, 'signed')).status).toBe(204);
    expect(arrived).toEqual(['GET /v1/things', 'GET /v1/quick']);
  });
});

/**
 * A request logging through the service's own logger into kept lines (@fcd/testing's logCapture):
 * each line as written, and [level, message, upstream] of each.
 */
function capturingRequest(): { request: FastifyRequest; readonly lines: unknown[][]; raw: string[] } {
  const { lines: raw, logger: log } = logCapture('proxy-test', 'info');
  const fields = (line: string) => {
    const parsed = JSON.parse(line) as { level: string; msg: string; upstream?: string };
    return [parsed.level, parsed.msg, parsed.upstream];
  };
  return {
    request: { ...request, log } as unknown as FastifyRequest,
    get lines() {
      return raw.map(fields);
    },
    raw,
  };
}
