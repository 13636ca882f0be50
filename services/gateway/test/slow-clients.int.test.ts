import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { gatewayEnv, type ServiceProcess, type Stack, startService, startStack, type TestAccount } from '@fcd/testing';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Slow clients at the edge: sockets whose head never ends, or whose body stops
 * after its first byte, are closed at the configured timeout with a 408
 * envelope, and the gateway answers everyone else meanwhile, including when
 * its process has only 1,024 file descriptors for more slow sockets than that.
 */

const HEADERS_TIMEOUT_MS = 3000;
const REQUEST_TIMEOUT_MS = 4000;
const timeouts = {
  HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
  HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  AUTH_DEADLINE_MS: '10000',
};

let stack: Stack;
let pro: TestAccount;

beforeAll(async () => {
  stack = await startStack({ label: 'slow_clients', gatewayEnv: timeouts });
  pro = await stack.createAccount('pro');
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

interface SlowSocket {
  socket: Socket;
  connectedAt: number;
  isClosed: () => boolean;
  /** What the server sent before closing, and when it closed. */
  closed: Promise<{ data: string; at: number }>;
}

const SLOW_HEAD = 'GET /v1/facilities HTTP/1.1\r\nHost: gateway\r\nX-Api-Key: ';
const SLOW_BODY = 'POST /nope HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{';

function slowSocket(port: number, bytes: string): Promise<SlowSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    let isClosed = false;
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => {
      data += c;
    });
    const closed = new Promise<{ data: string; at: number }>((done) => {
      socket.on('close', () => {
        isClosed = true;
        done({ data, at: Date.now() });
      });
    });
    socket.on('error', (err) => reject(err));
    socket.once('connect', () => {
      socket.write(bytes);
      resolve({ socket, connectedAt: Date.now(), isClosed: () => isClosed, closed });
    });
  });
}

const BATCH = 250;

/**
 * `count` slow sockets, half with an endless head, half with a body that stops after one byte,
 * opened in batches; `afterBatch` runs once each batch is connected.
 */
async function openSlowSockets(port: number, count: number, afterBatch?: (opened: SlowSocket[]) => Promise<void>): Promise<SlowSocket[]> {
  const sockets: SlowSocket[] = [];
  for (let i = 0; i < count; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, count - i) }, (_, j) => slowSocket(port, (i + j) % 2 === 0 ? SLOW_HEAD : SLOW_BODY));
    sockets.push(...(await Promise.all(batch)));
    await afterBatch?.(sockets);
  }
  return sockets;
}

/** Normal requests, each on a new connection: health and an authenticated, metered GET. */
async function normalRequests(base: string, n: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) {
    const client = new Client(base);
    try {
      const path = i % 2 === 0 ? '/healthz' : '/v1/account/usage';
      const res = await client.request({ method: 'GET', path, headers: { 'x-api-key': pro.apiKey } });
      await res.body.dump();
      statuses.push(res.statusCode);
    } finally {
      await client.close();
    }
  }
  return statuses;
}

function status(data: string): number | undefined {
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(data);
  return m ? Number(m[1]) : undefined;
}

function requestTimeoutEnvelope(data: string): boolean {
  const [head = '', body = ''] = data.split('\r\n\r\n');
  return (
    status(head) === 408 &&
    /\r\nx-request-id: req_[0-9a-f-]{36}\r\n/i.test(`${head}\r\n`) &&
    JSON.parse(body).error?.code === 'REQUEST_TIMEOUT'
  );
}

describe('slow clients', () => {
  it('closes 4,000 slow sockets at the configured timeout with a 408 envelope and answers others meanwhile', async () => {
    const base = stack.gatewayUrls[0] as string;
    // After each batch of slow sockets, two normal requests, answered while that batch (at least) is held open.
    const answers: Array<{ statuses: number[]; open: number }> = [];
    const slow = await openSlowSockets(Number(new URL(base).port), 4000, async (opened) => {
      const statuses = await normalRequests(base, 2);
      answers.push({ statuses, open: opened.filter((s) => !s.isClosed()).length });
    });
    expect(answers.map((a) => a.statuses)).toEqual(answers.map(() => [200, 200]));
    expect(answers.filter((a) => a.open < BATCH)).toEqual([]);

    const results = await Promise.all(slow.map(async (s) => ({ ...(await s.closed), connectedAt: s.connectedAt })));
    expect(results.filter((r) => !requestTimeoutEnvelope(r.data))).toEqual([]);
    // None is cut before its timeout (the head's for endless heads, the request's for stalled bodies).
    expect(results.filter((r) => r.at - r.connectedAt < HEADERS_TIMEOUT_MS - 50)).toEqual([]);
    expect(stack.gateways[0]?.proc.exitCode).toBeNull();
  }, 120_000);

  describe('with 1,024 file descriptors', () => {
    let gateway: ServiceProcess;
    let base: string;

    beforeAll(async () => {
      gateway = await startService(
        'gateway',
        { ...(await gatewayEnv(stack.usageEnv.GRPC_PORT as string)), ...timeouts },
        { fdLimit: 1024 },
      );
      base = `http://127.0.0.1:${(await gateway.waitForLog((l) => l.msg === 'ready')).port as number}`;
    }, 30_000);

    afterAll(async () => {
      await gateway?.stop();
    });

    it('keeps answering under 2,000 slow sockets: the oldest slow ones are shed, the rest cut at the timeout', async () => {
      expect(readFileSync(`/proc/${gateway.proc.pid}/limits`, 'utf8')).toMatch(/^Max open files\s+1024\s/m);
      const slow = await openSlowSockets(Number(new URL(base).port), 2000);
      const statuses = await normalRequests(base, 20);
      expect(statuses).toEqual(Array.from({ length: 20 }, () => 200));

      const results = await Promise.all(slow.map((s) => s.closed));
      const timedOut = results.filter((r) => requestTimeoutEnvelope(r.data)).length;
      const shed = results.filter((r) => r.data === '').length;
      // Shed sockets (closed unanswered to admit new connections) and 408s account for all of them.
      expect(timedOut + shed).toBe(2000);
      // The cap is the descriptor limit less a reserve of 256: at most 768 slow sockets stay open.
      expect(timedOut).toBeGreaterThan(0);
      expect(timedOut).toBeLessThanOrEqual(1024 - 256);
      expect(gateway.proc.exitCode).toBeNull();
      expect(await normalRequests(base, 2)).toEqual([200, 200]);
    }, 120_000);
  });
});
