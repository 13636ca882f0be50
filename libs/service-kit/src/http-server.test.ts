import { Agent, get, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Type } from '@sinclair/typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from './config';
import { AppError } from './errors';
import { baseFastifyOptions, installHttpConventions } from './http';
import {
  DESCRIPTOR_RESERVE,
  descriptorLimit,
  drainConnections,
  HttpServerEnv,
  type HttpServerSettings,
  maxConnections,
} from './http-server';
import { createLogger } from './logger';
import { createMetrics, Registry, startMetricsServer } from './metrics';

const settings: HttpServerSettings = {
  HTTP_REQUEST_TIMEOUT_MS: 600,
  HTTP_HEADERS_TIMEOUT_MS: 400,
  HTTP_KEEP_ALIVE_TIMEOUT_MS: 300,
  HTTP_MAX_CONNECTIONS: 6,
};

/** An answer larger than the socket buffers of loopback: it waits for its client to read. */
const BIG_BYTES = 16 * 1024 * 1024;
const serviceMetrics = createMetrics('http-server-test');
/** Requests /count has run. */
let counted = 0;
/** GET /held answers once this settles (a test sets it). */
let heldAnswer: Promise<void> = Promise.resolve();
let app: FastifyInstance;
let port: number;
let metrics: Server;
let metricsPort: number;

beforeAll(async () => {
  app = Fastify(baseFastifyOptions(createLogger({ service: 'http-server-test', level: 'silent' }), settings));
  installHttpConventions(app, { metrics: serviceMetrics });
  app.get('/ok', async () => ({ data: { ok: true } }));
  app.get('/slow-answer', async () => {
    await new Promise((r) => setTimeout(r, settings.HTTP_REQUEST_TIMEOUT_MS + 400));
    return { data: { ok: true } };
  });
  app.post('/echo', async (request) => ({ data: request.body }));
  app.post('/count', async () => ({ data: { count: ++counted } }));
  app.get('/big', async () => 'x'.repeat(BIG_BYTES));
  app.get('/held', async () => {
    await heldAnswer;
    return { data: { ok: true } };
  });
  app.post('/guarded', { onRequest: async () => Promise.reject(new AppError('UNAUTHORIZED', 'No.')) }, async () => ({ data: {} }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as { port: number }).port;
  metrics = await startMetricsServer(new Registry(), 0, '127.0.0.1', settings);
  metricsPort = (metrics.address() as { port: number }).port;
});
afterAll(async () => {
  await app.close();
  await new Promise((r) => metrics.close(r));
});

interface Exchange {
  socket: Socket;
  /** Everything the server sent, once it closed the connection. */
  closed: Promise<string>;
}

/** Opens a raw connection and writes `bytes` (the test decides what is left unsent). */
function raw(bytes: string, target = port): Exchange {
  const socket = connect(target, '127.0.0.1');
  let data = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    data += chunk;
  });
  const closed = new Promise<string>((resolve) => {
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(data));
  });
  socket.write(bytes, 'latin1');
  return { socket, closed };
}

function parse(response: string) {
  const [head = '', body = ''] = response.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: body ? JSON.parse(body) : undefined };
}

/** What the server sent once it closed the connection, or 'open' after `ms` (then it is cut). */
async function closedWithin(exchange: Exchange, ms: number): Promise<string> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const open = new Promise<string>((r) => {
    timer = setTimeout(() => r('open'), ms);
  });
  try {
    return await Promise.race([exchange.closed, open]);
  } finally {
    clearTimeout(timer);
    exchange.socket.destroy();
  }
}

async function ok(): Promise<number> {
  return (await fetch(`http://127.0.0.1:${port}/ok`, { headers: { connection: 'close' } })).status;
}

/** The server's sockets of the next `n` connections it accepts, once it has accepted them (the cap has judged each). */
function accepted(n: number): Promise<Socket[]> {
  const sockets: Socket[] = [];
  return new Promise((resolve) => {
    const onConnection = (socket: Socket) => {
      sockets.push(socket);
      if (sockets.length < n) return;
      app.server.off('connection', onConnection);
      resolve(sockets);
    };
    app.server.on('connection', onConnection);
  });
}

/** The responses of the next `n` requests the server reads on the connection of `client`. */
function requestsOn(client: Socket, n: number): Promise<ServerResponse[]> {
  const seen: ServerResponse[] = [];
  return new Promise((resolve) => {
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      if (req.socket.remotePort !== client.localPort) return;
      seen.push(res);
      if (seen.length < n) return;
      app.server.off('request', onRequest);
      resolve(seen);
    };
    app.server.prependListener('request', onRequest);
  });
}

/**
 * A client that does not read: `GET /big` (16 MiB, answered before its body) whose body stops after
 * a byte until the request timeout, then the rest of the body and a whole `POST /count`, read by
 * the server while the answer waits for its reader. Resolves once that request was read, with the
 * server's socket.
 */
async function requestAfterTimedOutBody(): Promise<{ socket: Socket; served: Socket; before: number }> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.pause();
  socket.write('GET /big HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{');
  const mine = (s: Socket) => s.remotePort === socket.localPort;
  await new Promise<void>((resolve) => {
    const timedOut = (err: Error & { code?: string }, s: Socket) => {
      if (!mine(s) || err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') return;
      app.server.off('clientError', timedOut);
      resolve();
    };
    app.server.prependListener('clientError', timedOut);
  });
  // Past the turn in which a timed-out request that completes is still served as in time.
  await new Promise((resolve) => setImmediate(resolve));
  const before = counted;
  const read = new Promise<Socket>((resolve) => {
    const seen = (req: { socket: Socket; url?: string }) => {
      if (!mine(req.socket) || req.url !== '/count') return;
      app.server.off('request', seen);
      resolve(req.socket);
    };
    app.server.prependListener('request', seen);
  });
  socket.write('}POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
  return { socket, served: await read, before };
}

describe('timeouts', () => {
  it('answers a request whose head never ends with 408 REQUEST_TIMEOUT and closes it', async () => {
    const slow = raw('GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    expect(await ok()).toBe(200);
    const res = parse(await slow.closed);
    expect(res.status).toBe(408);
    expect(res.headers['x-request-id']).toMatch(/^req_[0-9a-f-]{36}$/);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.body).toEqual({ error: { code: 'REQUEST_TIMEOUT', message: 'The request was not received in time.' } });
  });

  it('answers a body that stops after one byte with 408, quoting the request id', async () => {
    const slow = raw(
      'POST /echo HTTP/1.1\r\nHost: x\r\nX-Request-Id: slow-body-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
    );
    expect(await ok()).toBe(200);
    const res = parse(await slow.closed);
    expect(res.status).toBe(408);
    expect(res.headers['x-request-id']).toBe('slow-body-1');
    expect(res.body.error.code).toBe('REQUEST_TIMEOUT');
  });

  it('closes, without a second answer, a connection whose request was answered before its body arrived', async () => {
    const answered = raw('POST /guarded HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{');
    // The body trickles: only the request timeout closes the connection (not the keep-alive's).
    const timer = setInterval(() => answered.socket.write(' '), 100);
    try {
      const data = await closedWithin(answered, 5000);
      expect(parse(data).status).toBe(401);
      expect(data.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    } finally {
      clearInterval(timer);
    }
  });

  it('writes the whole of an answer given before its body to a client that reads late and keeps sending', async () => {
    // The answer waits for its reader; the request times out meanwhile. Closing at once when
    // the answer is written would reset the connection (unread body) and cut the answer's tail.
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.pause();
    socket.write('GET /big HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n');
    const body = setInterval(() => socket.write(Buffer.alloc(16 * 1024, 32)), 5);
    const timedOut = (err: Error & { code?: string }, s: Socket) => {
      if (s.remotePort !== socket.localPort || err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') return;
      app.server.off('clientError', timedOut);
      setTimeout(() => socket.resume(), 200);
    };
    app.server.prependListener('clientError', timedOut);
    let received = 0;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    try {
      await new Promise((resolve) => socket.once('close', resolve));
      expect(received).toBeGreaterThan(BIG_BYTES);
      expect(received).toBeLessThan(BIG_BYTES + 1000); // the head, and no second answer
    } finally {
      clearInterval(body);
      app.server.off('clientError', timedOut);
      socket.destroy();
    }
  });

  it('neither runs nor answers a request read while an answer given before its body is written, after a timeout', async () => {
    const { socket, before } = await requestAfterTimedOutBody();
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.resume();
    try {
      await new Promise((resolve) => socket.once('close', resolve));
      expect(data.match(/HTTP\/1\.1 /g)).toHaveLength(1);
      expect(data.length).toBeGreaterThan(BIG_BYTES);
      expect(counted).toBe(before);
    } finally {
      socket.destroy();
    }
  });

  it('sheds such a connection at the cap while its client does not read, as any slow one', async () => {
    const { socket, served } = await requestAfterTimedOutBody();
    // The server's end: the client's, not reading, would not see the close.
    const closed = new Promise((resolve) => served.once('close', () => resolve('closed')));
    // As many slow heads as the cap (6): the oldest connection that is not busy is shed.
    const others = Array.from({ length: 6 }, () => raw('GET /ok HTTP/1.1\r\nHost: x\r\n'));
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const open = new Promise((resolve) => {
        timer = setTimeout(() => resolve('open'), 5000);
      });
      expect(await Promise.race([closed, open])).toBe('closed');
      expect(served.destroyed).toBe(true);
    } finally {
      clearTimeout(timer);
      socket.destroy();
      for (const o of others) o.socket.destroy();
    }
  });

  it('writes an answer given before its body behind a slow pipelined answer, then closes', async () => {
    const exchange = raw(
      'GET /slow-answer HTTP/1.1\r\nHost: x\r\n\r\nPOST /guarded HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
    );
    const answers = (await closedWithin(exchange, 5000)).split(/(?=HTTP\/1\.1 )/).map(parse);
    expect(answers.map((a) => a.status)).toEqual([200, 401]);
  });

  it('neither runs nor answers a request read in the second after a 408 half-closed the connection', async () => {
    const exchange = raw('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{');
    await new Promise<void>((resolve) => {
      exchange.socket.on('data', (chunk: string) => chunk.includes('HTTP/1.1 408') && resolve());
    });
    const before = counted;
    // The rest of the body, then a whole request: read before the connection closes.
    exchange.socket.write('}POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
    const data = await closedWithin(exchange, 5000);
    expect(data.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(parse(data).status).toBe(408);
    expect(counted).toBe(before);
  });

  it('answers a body that never starts with 408', async () => {
    const idle = raw('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n');
    const res = parse(await idle.closed);
    expect(res.status).toBe(408);
    expect(res.body.error.code).toBe('REQUEST_TIMEOUT');
  });

  it('answers a body that trickles in with 408 at the request timeout', async () => {
    const slow = raw('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n');
    const timer = setInterval(() => slow.socket.write(' '), 100);
    try {
      const res = parse(await slow.closed);
      expect(res.status).toBe(408);
      expect(res.body.error.code).toBe('REQUEST_TIMEOUT');
    } finally {
      clearInterval(timer);
    }
  });

  it('answers a request already received when the process stalled past the headers timeout', async () => {
    // The stall (as of a paused process or VM) comes right after the connection is accepted, so
    // Node's timeout check runs before the request, already in the socket's buffer, is read.
    const raised: string[] = [];
    let stalled: Socket | undefined;
    const record = (err: Error & { code?: string }, socket: Socket) => {
      if (socket === stalled) raised.push(err.code ?? '');
    };
    app.server.prependListener('clientError', record);
    app.server.once('connection', (socket: Socket) => {
      stalled = socket;
      const end = performance.now() + settings.HTTP_HEADERS_TIMEOUT_MS + 200;
      while (performance.now() < end);
    });
    try {
      const res = parse(await closedWithin(raw('GET /ok HTTP/1.1\r\nHost: x\r\n\r\n'), 5000));
      expect(raised).toEqual(['ERR_HTTP_REQUEST_TIMEOUT']);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ data: { ok: true } });
    } finally {
      app.server.off('clientError', record);
    }
  });

  it('answers 408 when the head ends after the timeout check but its body never comes', async () => {
    // Node stops timing a connection once it raised its timeout: the request read in that turn
    // is served only if whole, else this one would stay open with nobody timing its body.
    const slow = raw('POST /echo HTTP/1.1\r\nHost: x\r\nX-Request-Id: hole-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n');
    const endHead = (_err: Error, socket: Socket) => {
      if (socket.remotePort !== slow.socket.localPort) return;
      app.server.off('clientError', endHead);
      slow.socket.write('\r\n');
    };
    app.server.prependListener('clientError', endHead);
    try {
      const res = parse(await closedWithin(slow, 5000));
      expect(res.status).toBe(408);
      // The id is known only from the head read in the turn the timeout waited for.
      expect(res.headers['x-request-id']).toBe('hole-1');
      expect(res.body.error.code).toBe('REQUEST_TIMEOUT');
    } finally {
      app.server.off('clientError', endHead);
    }
  });

  it('answers a pipelined request that times out behind a slow answer after that answer', async () => {
    const exchange = raw('GET /slow-answer HTTP/1.1\r\nHost: x\r\nX-Request-Id: first-1\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    const [first = '', second = ''] = (await closedWithin(exchange, 5000)).split(/(?=HTTP\/1\.1 )/);
    expect(parse(first).status).toBe(200);
    expect(parse(first).headers['x-request-id']).toBe('first-1');
    expect(parse(first).body).toEqual({ data: { ok: true } });
    const timedOut = parse(second);
    expect(timedOut.status).toBe(408);
    expect(timedOut.headers['x-request-id']).toMatch(/^req_[0-9a-f-]{36}$/);
    expect(timedOut.body.error.code).toBe('REQUEST_TIMEOUT');
  });

  it('answers the three of slow, quick and a head that stops in order: 200, 200, then 408', async () => {
    // The quick answer is queued behind the slow one (ended, not finished): the 408 follows both.
    const exchange = raw(
      'GET /slow-answer HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: ',
    );
    const answers = (await closedWithin(exchange, 5000)).split(/(?=HTTP\/1\.1 )/).map(parse);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 408]);
    expect(answers[2]?.body.error.code).toBe('REQUEST_TIMEOUT');
  });

  it('answers a pipelined body that stops behind a slow answer after that answer, quoting its id', async () => {
    const exchange = raw(
      'GET /slow-answer HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nX-Request-Id: body-2\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
    );
    const answers = (await closedWithin(exchange, 5000)).split(/(?=HTTP\/1\.1 )/).map(parse);
    expect(answers.map((a) => a.status)).toEqual([200, 408]);
    expect(answers[1]?.headers['x-request-id']).toBe('body-2');
    expect(answers[1]?.body.error.code).toBe('REQUEST_TIMEOUT');
  });

  it('never cuts the time a service takes to answer a received request', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/slow-answer`);
    expect(res.status).toBe(200);
  });

  it('closes an idle keep-alive connection after its answer without another response', async () => {
    const idle = raw('GET /ok HTTP/1.1\r\nHost: x\r\n\r\n');
    const res = parse(await idle.closed);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { ok: true } });
  });
});

describe('errors Node raises before routing get the envelope and an X-Request-Id', () => {
  it.each([
    [
      'Content-Length with Transfer-Encoding',
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}',
      400,
    ],
    ['two Content-Length headers', 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}', 400],
    ['a CR inside a header value', 'GET /ok HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n', 400],
    ['a LF inside a header name', 'GET /ok HTTP/1.1\r\nHost: x\r\nX\nA: b\r\n\r\n', 400],
    ['a NUL in a header value', 'GET /ok HTTP/1.1\r\nHost: x\r\nX-A: b\0c\r\n\r\n', 400],
    ['a malformed request line', 'GARBAGE\r\n\r\n', 400],
    ['headers over 16 KiB', `GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
  ])('%s', async (_name, bytes, status) => {
    const res = parse(await raw(bytes).closed);
    expect(res.status).toBe(status);
    expect(res.headers['x-request-id']).toMatch(/^req_[0-9a-f-]{36}$/);
    expect(res.headers.connection).toBe('close');
    expect(res.body).toEqual(
      status === 431
        ? { error: { code: 'HEADERS_TOO_LARGE', message: 'The request headers are too large.' } }
        : { error: { code: 'BAD_REQUEST', message: 'The request is not valid HTTP/1.1.' } },
    );
  });

  it('answers a malformed request pipelined behind a slow answer after that answer', async () => {
    const exchange = raw('GET /slow-answer HTTP/1.1\r\nHost: x\r\nX-Request-Id: first-2\r\n\r\nNOT HTTP\r\n\r\n');
    const [first = '', second = ''] = (await closedWithin(exchange, 5000)).split(/(?=HTTP\/1\.1 )/);
    expect(parse(first).status).toBe(200);
    expect(parse(first).headers['x-request-id']).toBe('first-2');
    expect(parse(second).status).toBe(400);
    expect(parse(second).body.error.code).toBe('BAD_REQUEST');
  });

  it('on the metrics port too, with its timeouts', async () => {
    const bad = parse(await raw('POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', metricsPort).closed);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('BAD_REQUEST');
    const slow = parse(await raw('GET /metrics HTTP/1.1\r\n', metricsPort).closed);
    expect(slow.status).toBe(408);
    expect(slow.headers['x-request-id']).toMatch(/^req_/);
  });
});

describe('connection cap', () => {
  it('closes the oldest slow connection to admit a new one, and keeps answering', async () => {
    const shed = async () => (await serviceMetrics.connectionsShed.get()).values.reduce((n, v) => n + v.value, 0);
    const shedBefore = await shed();
    const slow = Array.from({ length: 6 }, () => raw('GET /ok HTTP/1.1\r\nHost: x\r\n'));
    await Promise.all(slow.map((s) => new Promise((r) => s.socket.once('connect', r))));
    await new Promise((r) => setTimeout(r, 50)); // let the server accept all six
    expect(await ok()).toBe(200);
    const first = await Promise.race([slow[0]?.closed, new Promise((r) => setTimeout(() => r('open'), 200))]);
    expect(first).toBe(''); // closed without an answer, before any timeout
    expect((await shed()) - shedBefore).toBe(1);
    const rest = await Promise.all(slow.slice(1).map((s) => s.closed));
    expect(rest.map((r) => parse(r).status)).toEqual([408, 408, 408, 408, 408]);
  });

  it('keeps a pipelined connection whose earlier answer is still produced when a later one has ended', async () => {
    let release: () => void = () => undefined;
    heldAnswer = new Promise<void>((resolve) => {
      release = resolve;
    });
    const pipelined = raw('');
    await new Promise((r) => pipelined.socket.once('connect', r));
    const read = requestsOn(pipelined.socket, 2);
    pipelined.socket.write('GET /held HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n');
    const [held, quick] = (await read) as [ServerResponse, ServerResponse];
    // The later answer ended (queued behind the held one): the last exchange is over.
    while (!quick.writableEnded) await new Promise((r) => setImmediate(r));
    expect([held.writableEnded, quick.writableFinished]).toEqual([false, false]);
    // As many slow heads as the cap (6): the oldest connection that is not busy is the first of them.
    const next = accepted(6);
    const slow = Array.from({ length: 6 }, () => raw('GET /ok HTTP/1.1\r\nHost: x\r\n'));
    try {
      const [first] = await next;
      expect(held.req.socket.destroyed).toBe(false);
      expect(first?.destroyed).toBe(true);
      release();
      const answers = (await closedWithin(pipelined, 5000)).split(/(?=HTTP\/1\.1 )/).map(parse);
      expect(answers.map((a) => a.status)).toEqual([200, 200]);
    } finally {
      release();
      for (const s of slow) s.socket.destroy();
    }
  });

  it('sheds a pipelined connection whose answers have all ended while its client does not read', async () => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.pause();
    await new Promise((r) => socket.once('connect', r));
    const read = requestsOn(socket, 2);
    socket.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n');
    const seen = await read;
    while (!seen.every((res) => res.writableEnded)) await new Promise((r) => setImmediate(r));
    expect(seen.map((res) => res.writableFinished)).toEqual([false, false]);
    const next = accepted(6);
    const slow = Array.from({ length: 6 }, () => raw('GET /ok HTTP/1.1\r\nHost: x\r\n'));
    try {
      await next;
      expect(seen[0]?.req.socket.destroyed).toBe(true);
    } finally {
      socket.destroy();
      for (const s of slow) s.socket.destroy();
    }
  });

  it('sheds a connection whose body is still coming, as any slow one', async () => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((r) => socket.once('connect', r));
    const read = requestsOn(socket, 1);
    socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{');
    const [res] = await read;
    expect(res?.req.complete).toBe(false);
    const next = accepted(6);
    const slow = Array.from({ length: 6 }, () => raw('GET /ok HTTP/1.1\r\nHost: x\r\n'));
    try {
      await next;
      expect(res?.req.socket.destroyed).toBe(true);
    } finally {
      socket.destroy();
      for (const s of slow) s.socket.destroy();
    }
  });

  it('derives the cap from the descriptor limit', () => {
    const limits =
      'Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 4096                 files     \n';
    expect(descriptorLimit(limits)).toBe(1024);
    expect(descriptorLimit('Max open files            unlimited            unlimited            files\n')).toBeUndefined();
    const base = { HTTP_REQUEST_TIMEOUT_MS: 1, HTTP_HEADERS_TIMEOUT_MS: 1, HTTP_KEEP_ALIVE_TIMEOUT_MS: 1 };
    expect(maxConnections(base, 1024)).toBe(1024 - DESCRIPTOR_RESERVE);
    expect(maxConnections(base, 100)).toBe(64);
    expect(maxConnections({ ...base, HTTP_MAX_CONNECTIONS: 10 }, 1024)).toBe(10);
  });
});

describe('configuration', () => {
  const schema = Type.Object({ ...HttpServerEnv });

  it('has defaults and reads the environment', () => {
    expect(parseConfig(schema, {})).toEqual({
      HTTP_REQUEST_TIMEOUT_MS: 30_000,
      HTTP_HEADERS_TIMEOUT_MS: 10_000,
      HTTP_KEEP_ALIVE_TIMEOUT_MS: 72_000,
      HTTP_DRAIN_MS: 1000,
    });
    expect(
      parseConfig(schema, { HTTP_MAX_CONNECTIONS: '500', HTTP_REQUEST_TIMEOUT_MS: '5000', HTTP_HEADERS_TIMEOUT_MS: '5000' }),
    ).toMatchObject({
      HTTP_MAX_CONNECTIONS: 500,
      HTTP_REQUEST_TIMEOUT_MS: 5000,
    });
  });

  it('refuses a headers timeout above the request timeout', () => {
    expect(() => parseConfig(schema, { HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' })).toThrow(
      new ConfigError(['HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS']),
    );
    expect(() => parseConfig(schema, { HTTP_REQUEST_TIMEOUT_MS: 'soon' })).toThrow(ConfigError);
  });
});

/** A GET through a keep-alive agent: the status and the Connection header of the answer. */
function keepAliveGet(agent: Agent, url: string): Promise<{ status: number; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    get(url, { agent }, (res) => {
      res.resume();
      res.once('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
    }).once('error', reject);
  });
}

describe('drainConnections', () => {
  it('answers requests on open keep-alive connections with Connection: close, and resolves once they are closed', async () => {
    const drained = Fastify(baseFastifyOptions(createLogger({ service: 'drain-test', level: 'silent' }), settings));
    drained.get('/ok', async () => ({ data: { ok: true } }));
    await drained.listen({ port: 0, host: '127.0.0.1' });
    const origin = `http://127.0.0.1:${(drained.server.address() as { port: number }).port}`;
    const client = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await keepAliveGet(client, `${origin}/ok`)).toEqual({ status: 200, connection: 'keep-alive' });
      const t0 = Date.now();
      const draining = drainConnections(drained.server, 5000);
      // The client still sends on its open connection (the replica already left the Service): answered, then closed.
      expect(await keepAliveGet(client, `${origin}/ok`)).toEqual({ status: 200, connection: 'close' });
      await draining;
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      client.destroy();
      await drained.close();
    }
  });

  it('gives up after its bound when a client keeps an idle connection open', async () => {
    const drained = Fastify(baseFastifyOptions(createLogger({ service: 'drain-test', level: 'silent' }), settings));
    drained.get('/ok', async () => ({ data: { ok: true } }));
    await drained.listen({ port: 0, host: '127.0.0.1' });
    const socket = connect((drained.server.address() as { port: number }).port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    try {
      const t0 = Date.now();
      await drainConnections(drained.server, 300);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
      expect(Date.now() - t0).toBeLessThan(1500);
    } finally {
      socket.destroy();
      await drained.close();
    }
  });
});
