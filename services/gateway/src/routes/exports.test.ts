import { connect, type Socket } from 'node:net';
import { create } from '@bufbuild/protobuf';
import { AuthorizeResultSchema, Decision } from '@fcd/proto';
import { InternalAuth, installHttpConventions, serviceUnavailable } from '@fcd/service-kit';
import Fastify, { type FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import type { AuthorizationBatcher } from '../auth/batcher';
import type { Upstream, UpstreamPage } from '../clients/proxy';
import type { ExportSlot } from '../store/export-slots';
import { type ExportLimits, registerExports } from './exports';

// The export route over scripted upstream pages and page counts: what reaches the client when a
// later page fails or cannot be counted (docs/api.md, "Bulk export"). The happy path over the real
// services, 50,000 rows and its memory bound are test/exports.int.test.ts.

/** A body read as `chunks`, then failing with `error` when one is given. */
async function* body(chunks: string[], error?: Error): AsyncGenerator<Buffer> {
  for (const chunk of chunks) yield Buffer.from(chunk);
  if (error) throw error;
}

/** A page of NDJSON rows `ids`, read in one chunk per row; `more`: another page follows. */
function page(ids: string[], more: boolean): UpstreamPage {
  return {
    status: 200,
    headers: { 'x-export-rows': String(ids.length), 'x-export-more': String(more), 'x-export-last': ids.at(-1) ?? '' },
    body: body(ids.map((id) => `${JSON.stringify({ id })}\n`)),
  };
}

/** A page of rows `ids` read in chunks of `size` bytes (records cut anywhere), its body failing after `failAfter` bytes when given. */
function cutPage(ids: string[], more: boolean, size: number, failAfter?: number): UpstreamPage {
  const text = ids.map((id) => `${JSON.stringify({ id, name: `Plant ${id}, "Unit" B` })}\n`).join('');
  const sent = failAfter === undefined ? text : text.slice(0, failAfter);
  const chunks: string[] = [];
  for (let at = 0; at < sent.length; at += size) chunks.push(sent.slice(at, at + size));
  const failed = page(ids, more);
  return { ...failed, body: body(chunks, failAfter === undefined ? undefined : new Error('other side closed')) };
}

const ALLOWED = create(AuthorizeResultSchema, { decision: Decision.ALLOWED });

/** Slots that count what is held; `acquire` answers with `refuse` (null: all taken; an Error: Redis down). */
function fakeSlots(refuse?: null | Error) {
  const held = { now: 0, asked: [] as Array<{ accountId: string; limit: number }> };
  const slots: ExportLimits['slots'] = {
    acquire: async (accountId, limit) => {
      held.asked.push({ accountId, limit });
      if (refuse !== undefined) {
        if (refuse instanceof Error) throw refuse;
        return null;
      }
      held.now++;
      let released = false;
      const slot: ExportSlot = {
        release: () => {
          if (!released) held.now--;
          released = true;
        },
      };
      return slot;
    },
  };
  return { slots, held };
}

interface RouteOptions {
  slots?: ExportLimits['slots'];
  tierRank?: number;
  perReplica?: number;
  /** The first page's fetch waits for it. */
  hold?: Promise<void>;
  /** The send timeout and the grace after it (default 30 s and 5 s). */
  sendTimeoutMs?: number;
  graceMs?: number;
}

/** The route with `pages` answered in turn (an Error is thrown instead) and each further page's count answered by `counts`. */
function exportRoute(pages: Array<UpstreamPage | Error>, counts: Array<typeof ALLOWED> = [], options: RouteOptions = {}) {
  const asked: string[] = [];
  const facility = {
    name: 'facility',
    getInternal: async (path: string) => {
      asked.push(path);
      if (asked.length === 1) await options.hold;
      const next = pages.shift();
      if (next === undefined || next instanceof Error) throw next ?? new Error('no page scripted');
      return next;
    },
  } as unknown as Upstream;
  let counted = 0;
  const batcher = {
    authorize: async () => {
      counted++;
      return counts.shift() ?? ALLOWED;
    },
  } as unknown as AuthorizationBatcher;
  const app = Fastify();
  installHttpConventions(app);
  app.addHook('onRequest', async (request) => {
    request.account = { accountId: 'acct_1', tier: 'pro', tierRank: options.tierRank ?? 1 };
    request.meterKey = 'fcd_test';
  });
  const limits: ExportLimits = {
    slots: options.slots ?? fakeSlots().slots,
    concurrency: { pro: 2, enterprise: 4 },
    perReplica: options.perReplica ?? 10,
    sendTimeoutMs: options.sendTimeoutMs ?? 30_000,
    graceMs: options.graceMs ?? 5000,
  };
  registerExports(app, { facility, batcher, limits, internalAuth: new InternalAuth('export-test-secret-0123456789abcdef') });
  return { app, asked, counted: () => counted };
}

/** One export through `exportRoute`. */
async function exportWith(pages: Array<UpstreamPage | Error>, counts: Array<typeof ALLOWED> = [], options: RouteOptions = {}) {
  const { app, asked, counted } = exportRoute(pages, counts, options);
  const res = await app.inject({ method: 'GET', url: '/v1/exports/facilities' });
  await app.close();
  const lines = res.body.trimEnd().split('\n');
  return { res, lines, asked, counted };
}

/** GET /big: an answer far larger than loopback's socket buffers, so it waits for its reader. */
function addBigAnswer(app: FastifyInstance): void {
  app.get('/big', async () => 'x'.repeat(16 * 1024 * 1024));
}

/** Starts `app` and connects a client that reads nothing: what is sent to it stays in the buffers. */
async function listenWithIdleReader(app: FastifyInstance): Promise<Socket> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const client = connect((app.server.address() as { port: number }).port, '127.0.0.1');
  client.on('error', () => undefined);
  client.pause();
  return client;
}

describe('GET /v1/exports/{kind}, pages that fail or are not counted', () => {
  it('writes every page whole and in order, counts each after the first, and ends complete', async () => {
    const { res, lines, asked, counted } = await exportWith([page(['a', 'b'], true), page(['c', 'd', 'e'], false)]);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(lines).toEqual([
      '{"id":"a"}',
      '{"id":"b"}',
      '{"id":"c"}',
      '{"id":"d"}',
      '{"id":"e"}',
      '{"export":{"complete":true,"rows":5,"after":null}}',
    ]);
    expect(asked.map((p) => new URL(p, 'http://x').searchParams.get('after'))).toEqual([null, 'b']);
    expect(counted()).toBe(1);
  });

  it('a facility failing after a page ends the export with a line that resumes after its last row', async () => {
    const { res, lines } = await exportWith([page(['a', 'b'], true), page(['c'], true), serviceUnavailable('facility', 1)]);
    expect(res.statusCode).toBe(200);
    expect(lines.slice(0, 3)).toEqual(['{"id":"a"}', '{"id":"b"}', '{"id":"c"}']);
    // The line says to resume, not the first page's "Retry after 1 s" (that request is answered).
    expect(JSON.parse(lines[3] as string)).toEqual({
      export: {
        complete: false,
        rows: 3,
        after: 'c',
        error: { code: 'SERVICE_UNAVAILABLE', message: 'The facility service is unavailable. Resume with `after`.' },
      },
    });
    expect(lines).toHaveLength(4);
  });

  it('streams pages read in chunks that cut records anywhere as exactly the rows, whole, in order', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => `id-${String(i).padStart(2, '0')}`);
    const { lines } = await exportWith([cutPage(ids.slice(0, 25), true, 7), cutPage(ids.slice(25), false, 64)]);
    expect(lines).toEqual([
      ...ids.map((id) => JSON.stringify({ id, name: `Plant ${id}, "Unit" B` })),
      '{"export":{"complete":true,"rows":40,"after":null}}',
    ]);
  });

  it('a page failing part-way ends after its last whole row: no half row, and the line resumes after that row', async () => {
    // The second page's body breaks 10 bytes into its third row (each row is 42 bytes).
    const { res, lines } = await exportWith([page(['a0', 'b0'], true), cutPage(['c0', 'd0', 'e0', 'f0'], true, 16, 2 * 42 + 10)]);
    expect(res.statusCode).toBe(200);
    expect(lines).toEqual([
      '{"id":"a0"}',
      '{"id":"b0"}',
      '{"id":"c0","name":"Plant c0, \\"Unit\\" B"}',
      '{"id":"d0","name":"Plant d0, \\"Unit\\" B"}',
      JSON.stringify({
        export: {
          complete: false,
          rows: 4,
          after: 'd0',
          error: { code: 'SERVICE_UNAVAILABLE', message: 'The facility service is unavailable. Resume with `after`.' },
        },
      }),
    ]);
  });

  it.each([
    [
      'over the daily limit',
      create(AuthorizeResultSchema, { decision: Decision.RATE_LIMITED, dailyLimit: 1000, resetsAt: '2026-11-30T00:00:00Z' }),
      {
        code: 'RATE_LIMIT_EXCEEDED',
        message: 'Daily request limit of 1000 requests exceeded. The limit resets at 2026-11-30T00:00:00Z. Resume with `after`.',
      },
    ],
    [
      'its key revoked during the export',
      create(AuthorizeResultSchema, { decision: Decision.UNAUTHENTICATED }),
      { code: 'UNAUTHORIZED', message: 'A valid API key is required. Send it in the X-API-Key header. Resume with `after`.' },
    ],
  ])(
    'a page that cannot be counted (%s) is not sent: the export ends before it, resumable from the last row sent',
    async (_name, refused, error) => {
      const { lines, counted } = await exportWith([page(['a'], true), page(['b'], true), page(['c'], false)], [ALLOWED, refused]);
      expect(counted()).toBe(2);
      expect(lines.slice(0, 2)).toEqual(['{"id":"a"}', '{"id":"b"}']);
      expect(JSON.parse(lines[2] as string)).toEqual({ export: { complete: false, rows: 2, after: 'b', error } });
      expect(lines).toHaveLength(3);
    },
  );
});

describe('GET /v1/exports/{kind}, concurrent exports of one account', () => {
  it("takes a slot of the tier's limit before the first page and gives it back when the response closes", async () => {
    const { slots, held } = fakeSlots();
    const pro = await exportWith([page(['a'], false)], [], { slots, tierRank: 1 });
    expect(pro.res.statusCode).toBe(200);
    const enterprise = await exportWith([page(['a'], false)], [], { slots, tierRank: 2 });
    expect(enterprise.res.statusCode).toBe(200);
    expect(held.asked).toEqual([
      { accountId: 'acct_1', limit: 2 },
      { accountId: 'acct_1', limit: 4 },
    ]);
    expect(held.now).toBe(0);
  });

  it('gives the slot back when the first page fails', async () => {
    const { slots, held } = fakeSlots();
    const { res } = await exportWith([serviceUnavailable('facility', 1)], [], { slots });
    expect(res.statusCode).toBe(503);
    expect(held.now).toBe(0);
  });

  it('answers 429 CONCURRENCY_LIMIT_EXCEEDED with Retry-After when every slot is taken, and asks for no page', async () => {
    const { res, asked } = await exportWith([page(['a'], false)], [], { slots: fakeSlots(null).slots });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('5');
    expect(res.json()).toEqual({
      error: {
        code: 'CONCURRENCY_LIMIT_EXCEEDED',
        message: 'At most 2 exports of this account may run at once. Retry when one of them has ended.',
        details: { limit: 2 },
      },
    });
    expect(asked).toEqual([]);
  });

  it('answers 503 with Retry-After when the slots cannot be read (Redis down), and asks for no page', async () => {
    const { res, asked } = await exportWith([page(['a'], false)], [], { slots: fakeSlots(new Error('connection refused')).slots });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json().error.code).toBe('SERVICE_UNAVAILABLE');
    expect(asked).toEqual([]);
  });
});

describe('GET /v1/exports/{kind}, exports at once on one gateway', () => {
  it("answers 503 with Retry-After past the replica's limit, whatever the account, and admits again once one ends", async () => {
    let letGo = () => {};
    const hold = new Promise<void>((r) => {
      letGo = r;
    });
    const { app } = exportRoute([page(['a'], false), page(['b'], false)], [], { perReplica: 1, hold });
    const first = app.inject({ method: 'GET', url: '/v1/exports/facilities' });
    await new Promise((r) => setImmediate(r));
    const refused = await app.inject({ method: 'GET', url: '/v1/exports/facilities' });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBe('5');
    expect(refused.json().error.code).toBe('SERVICE_UNAVAILABLE');
    letGo();
    expect((await first).statusCode).toBe(200);
    const again = await app.inject({ method: 'GET', url: '/v1/exports/facilities' });
    expect(again.statusCode).toBe(200);
    await app.close();
  });
});

describe('GET /v1/exports/{kind}, a reader that takes nothing', () => {
  it('gives back the slots of exports queued behind one that is cut, with one listener on the connection', async () => {
    const { slots, held } = fakeSlots();
    const rows = Array.from({ length: 2000 }, (_, i) => `row-${i}`);
    const pipelined = 12;
    const pages = Array.from({ length: pipelined + 1 }, () => page(rows, false));
    const { app } = exportRoute(pages, [], { slots, perReplica: pipelined, sendTimeoutMs: 200, graceMs: 100 });
    addBigAnswer(app);
    let before = 0;
    const first = new Promise<Socket>((resolve) => {
      app.addHook('onRequest', async (request) => {
        if (!request.url.startsWith('/v1/exports/') || held.asked.length > 0) return;
        before = request.raw.socket.listenerCount('close');
        resolve(request.raw.socket);
      });
    });
    const client = await listenWithIdleReader(app);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      // Exports pipelined behind /big, nothing read: the first is cut and its grace closes the
      // connection; the others, queued behind it, never get the socket.
      client.write(`GET /big HTTP/1.1\r\nHost: x\r\n\r\n${'GET /v1/exports/facilities HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(pipelined)}`);
      const socket = await first;
      while (held.asked.length < pipelined) await new Promise((r) => setImmediate(r));
      expect(socket.listenerCount('close')).toBe(before + 1);
      const closed = new Promise<string>((resolve) => socket.once('close', () => resolve('closed')));
      const open = new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve('open'), 5000);
      });
      expect(await Promise.race([closed, open])).toBe('closed');
      expect(held.now).toBe(0);
      // Every place of the replica is free again: one more export runs.
      const next = await app.inject({ method: 'GET', url: '/v1/exports/facilities' });
      expect(next.statusCode).toBe(200);
    } finally {
      clearTimeout(timer);
      client.destroy();
      await app.close();
    }
  });

  it('fetches no page when the connection closes while the slot is acquired, and gives the slot back', async () => {
    const { slots: granting, held } = fakeSlots();
    let open: (value: unknown) => void = () => undefined;
    const gate = new Promise((resolve) => {
      open = resolve;
    });
    let acquiring: (value: unknown) => void = () => undefined;
    const acquired = new Promise((resolve) => {
      acquiring = resolve;
    });
    const slots: ExportLimits['slots'] = {
      acquire: async (accountId, limit) => {
        acquiring(undefined);
        await gate;
        return granting.acquire(accountId, limit);
      },
    };
    const { app, asked } = exportRoute([page(['a'], false)], [], { slots });
    let serverSocket: Socket | undefined;
    app.addHook('onRequest', async (request) => {
      serverSocket = request.raw.socket;
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const client = connect((app.server.address() as { port: number }).port, '127.0.0.1');
    client.on('error', () => undefined);
    try {
      client.write('GET /v1/exports/facilities HTTP/1.1\r\nHost: x\r\n\r\n');
      await acquired;
      const closed = new Promise((resolve) => serverSocket?.once('close', resolve));
      client.destroy();
      await closed;
      open(undefined);
      while (held.asked.length < 1) await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(asked).toEqual([]);
      expect(held.now).toBe(0);
    } finally {
      client.destroy();
      await app.close();
    }
  });

  const noWalk: Array<[string, { refuse?: null; first: UpstreamPage | Error; method: string; next: number }]> = [
    ['refused a slot', { refuse: null, first: page(['a'], false), method: 'GET', next: 429 }],
    ['whose first page is refused', { first: { status: 400, headers: {}, body: body(['{"error":{}}']) }, method: 'GET', next: 200 }],
    ['whose first page cannot be fetched', { first: serviceUnavailable('facility', 1), method: 'GET', next: 200 }],
    ['asked with HEAD', { first: page(['a'], false), method: 'HEAD', next: 200 }],
  ];
  it.each(noWalk)('frees the places of an export %s at once, even while its answer waits', async (_, c) => {
    const { slots, held } = fakeSlots(c.refuse);
    const { app } = exportRoute([c.first, page(['b'], false)], [], { slots, perReplica: 1 });
    addBigAnswer(app);
    // Its answer is given (and queued): every place it lets go is let go before.
    const answered = new Promise<void>((resolve) => {
      app.addHook('onSend', async (request, _reply, payload) => {
        if (request.url.startsWith('/v1/exports/')) resolve();
        return payload;
      });
    });
    const client = await listenWithIdleReader(app);
    try {
      // Its answer is queued behind /big, which this client never reads.
      client.write(`GET /big HTTP/1.1\r\nHost: x\r\n\r\n${c.method} /v1/exports/facilities HTTP/1.1\r\nHost: x\r\n\r\n`);
      await answered;
      // The replica's one place is free: the next is refused by nothing or by its account's limit
      // (429), not by the replica's (503).
      const next = await app.inject({ method: 'GET', url: '/v1/exports/facilities' });
      expect(next.statusCode).toBe(c.next);
      expect(held.now).toBe(0);
    } finally {
      client.destroy();
      await app.close();
    }
  });

  it('closes the connection after the grace, and gives the slot back, when the export is queued behind an unread answer', async () => {
    const { slots, held } = fakeSlots();
    const rows = Array.from({ length: 2000 }, (_, i) => `row-${i}`);
    const { app } = exportRoute([page(rows, true), page(rows, false)], [], { slots, sendTimeoutMs: 200, graceMs: 100 });
    addBigAnswer(app);
    let exportSocket: Socket | undefined;
    const closed = new Promise<string>((resolve) => {
      app.addHook('onRequest', async (request, reply) => {
        if (!request.url.startsWith('/v1/exports/')) return;
        exportSocket = request.raw.socket;
        reply.raw.once('close', () => resolve('closed'));
      });
    });
    const client = await listenWithIdleReader(app);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      // Pipelined: the export's answer is queued behind /big, which this client never reads.
      client.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/exports/facilities HTTP/1.1\r\nHost: x\r\n\r\n');
      const open = new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve('open'), 5000);
      });
      expect(await Promise.race([closed, open])).toBe('closed');
      expect(exportSocket?.destroyed).toBe(true);
      expect(held.asked).toHaveLength(1);
      expect(held.now).toBe(0);
    } finally {
      clearTimeout(timer);
      client.destroy();
      await app.close();
    }
  });
});
