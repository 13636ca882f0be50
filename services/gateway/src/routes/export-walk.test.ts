import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import { Decision } from '@fcd/proto';
import { AppError, ManualClock, serviceUnavailable } from '@fcd/service-kit';
import type { FastifyBaseLogger } from 'fastify';
import { Pool } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AuthorizationBatcher } from '../auth/batcher';
import type { UpstreamPage } from '../clients/proxy';
import { RecordCut } from './export-records';
import { discard, line, newWalkState, READ_RELEASE_INTERVAL_MS, readBufferRelease, type Walk, walkPages } from './export-walk';
import { SendGuard } from './send-guard';

// An export page streamed through the walk and the send guard (./export-walk.ts): what the gateway
// holds while its reader takes nothing, and where records are cut. The route is ./exports.test.ts.

const ROW_BYTES = 1000;
const CHUNK_BYTES = 4096;
const ROWS = 1000;

/** A page of ROWS rows of ROW_BYTES bytes each, read in CHUNK_BYTES chunks only as they are asked for. */
function lazyPage() {
  const read = { chunks: 0 };
  async function* body(): AsyncGenerator<Buffer> {
    const rows = Array.from({ length: ROWS }, (_, i) => {
      const id = `row-${String(i).padStart(4, '0')}`;
      return `${JSON.stringify({ id, pad: 'x'.repeat(ROW_BYTES - 27) })}\n`;
    }).join('');
    for (let at = 0; at < rows.length; at += CHUNK_BYTES) {
      read.chunks++;
      yield Buffer.from(rows.slice(at, at + CHUNK_BYTES));
    }
  }
  const page: UpstreamPage = {
    status: 200,
    headers: { 'x-export-rows': String(ROWS), 'x-export-more': 'true', 'x-export-last': 'row-0999' },
    body: body(),
  };
  return { page, read };
}

const log = { warn: () => undefined, info: () => undefined } as unknown as FastifyBaseLogger;

function walk(): Walk {
  return {
    kind: 'facilities',
    publicPath: '/v1/exports/facilities',
    key: 'fcd_test',
    csv: false,
    log,
    batcher: {} as AuthorizationBatcher,
    fetchPage: async () => {
      throw new Error('no further page is fetched while the reader stalls');
    },
    afterPage: () => undefined,
    gone: () => false,
  };
}

/** Lets the guard pull until its buffer is full (each pull is a chain of resolved promises). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

describe('an export page streamed to a reader that takes nothing', () => {
  it('reads only until the body’s buffer is full: five 4 KiB chunks of a 250-chunk page held', async () => {
    const { page, read } = lazyPage();
    const state = newWalkState();
    const stalls: Array<() => void> = [];
    const guard = new SendGuard(walkPages(walk(), page, state), {
      sendTimeoutMs: 30_000,
      onStall: () => [...state.pending.splice(0), line(state, new AppError('REQUEST_TIMEOUT', 'cut'))],
      timers: { setTimeout: ((fn: () => void) => stalls.push(fn)) as unknown as typeof setTimeout, clearTimeout: () => undefined },
    });
    guard.pause();
    guard.read(0);
    await settle();
    // 16 KiB is the body's high-water mark: the fifth chunk's whole rows pass it, and then nothing
    // more is read from the facility service however long the reader stalls. Held: five chunks.
    expect(read.chunks).toBe(5);
    expect(guard.readableLength).toBe(16_384);
    // Waiting besides: the rest of the fifth chunk's whole rows, and the start of row 21.
    expect(state.pending.map((piece) => piece.length)).toEqual([20 * ROW_BYTES - 16_384]);
    expect(state.rows).toBe(20);

    // The cut: what was read and cut is queued, the resume line names the last whole row handed on.
    expect(stalls).toHaveLength(1);
    stalls[0]?.();
    const chunks: Buffer[] = [];
    guard.resume();
    for await (const chunk of guard) chunks.push(Buffer.from(chunk));
    const lines = Buffer.concat(chunks).toString().trimEnd().split('\n');
    expect(lines).toHaveLength(21);
    expect(lines.slice(0, 20).map((l) => JSON.parse(l).id)).toEqual(
      Array.from({ length: 20 }, (_, i) => `row-${String(i).padStart(4, '0')}`),
    );
    expect(JSON.parse(lines[20] as string)).toEqual({
      export: { complete: false, rows: 20, after: 'row-0019', error: { code: 'REQUEST_TIMEOUT', message: 'cut' } },
    });
    expect(read.chunks).toBe(5);
  });
});

/** A page of `ids`, one NDJSON row each, read as one chunk per row; `events` records each read. */
function smallPage(ids: string[], more: boolean, events: string[]): UpstreamPage {
  async function* body(): AsyncGenerator<Buffer> {
    for (const id of ids) {
      events.push(`read ${id}`);
      yield Buffer.from(`${JSON.stringify({ id })}\n`);
    }
  }
  return {
    status: 200,
    headers: { 'x-export-rows': String(ids.length), 'x-export-more': String(more), 'x-export-last': ids.at(-1) as string },
    body: body(),
  };
}

describe('the walk over an export’s pages', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('asks V8 for a young collection after each page, once the page is handed on, so its socket reads are freed', async () => {
    const events: string[] = [];
    vi.stubGlobal('gc', (options: unknown) => events.push(`gc ${JSON.stringify(options)}`));
    const clock = new ManualClock(0);
    const second = smallPage(['c', 'd'], false, events);
    const w: Walk = {
      ...walk(),
      batcher: { authorize: async () => ({ decision: Decision.ALLOWED }) } as unknown as AuthorizationBatcher,
      fetchPage: async (after) => {
        events.push(`fetch after ${after}`);
        clock.advance(READ_RELEASE_INTERVAL_MS);
        return second;
      },
      afterPage: readBufferRelease(clock),
    };
    const out: string[] = [];
    for await (const piece of walkPages(w, smallPage(['a', 'b'], true, events), newWalkState())) {
      const text = piece.toString();
      events.push(`handed on ${text.trimEnd()}`);
      out.push(text);
    }
    expect(events).toEqual([
      'read a',
      'handed on {"id":"a"}',
      'read b',
      'handed on {"id":"b"}',
      'gc {"type":"minor"}',
      'fetch after b',
      'read c',
      'handed on {"id":"c"}',
      'read d',
      'handed on {"id":"d"}',
      'gc {"type":"minor"}',
      'handed on {"export":{"complete":true,"rows":4,"after":null}}',
    ]);
    expect(out.join('')).toBe('{"id":"a"}\n{"id":"b"}\n{"id":"c"}\n{"id":"d"}\n{"export":{"complete":true,"rows":4,"after":null}}\n');
  });

  it('asks after a page that fails part-way too, before the resume line', async () => {
    const events: string[] = [];
    vi.stubGlobal('gc', () => events.push('gc'));
    async function* failing(): AsyncGenerator<Buffer> {
      yield Buffer.from('{"id":"a"}\n');
      throw new Error('socket closed');
    }
    const page: UpstreamPage = { status: 200, headers: {}, body: failing() };
    for await (const piece of walkPages({ ...walk(), afterPage: readBufferRelease(new ManualClock(0)) }, page, newWalkState())) {
      events.push(piece.toString().trimEnd());
    }
    expect(events).toEqual([
      '{"id":"a"}',
      'gc',
      '{"export":{"complete":false,"rows":1,"after":"a","error":{"code":"SERVICE_UNAVAILABLE","message":"The facility service is unavailable. Resume with `after`."}}}',
    ]);
  });

  it('asks at most once per interval, whatever the number of exports sharing it', () => {
    const calls: unknown[] = [];
    vi.stubGlobal('gc', (options: unknown) => calls.push(options));
    const clock = new ManualClock(1_000);
    const release = readBufferRelease(clock);
    release();
    release();
    clock.advance(READ_RELEASE_INTERVAL_MS - 1);
    release();
    expect(calls).toEqual([{ type: 'minor' }]);
    clock.advance(1);
    release();
    expect(calls).toEqual([{ type: 'minor' }, { type: 'minor' }]);
  });

  it.each([
    [
      'unreachable (a 503 to retry)',
      serviceUnavailable('facility', 1),
      'SERVICE_UNAVAILABLE',
      'The facility service is unavailable. Resume with `after`.',
    ],
    [
      'failing (a 500 with the request id)',
      new AppError('INTERNAL_ERROR', 'An internal error occurred. Quote request id req_1 when reporting it.'),
      'INTERNAL_ERROR',
      'An internal error occurred. Quote request id req_1 when reporting it. Resume with `after`.',
    ],
    [
      'throwing something else',
      new Error('socket hang up'),
      'SERVICE_UNAVAILABLE',
      'The facility service is unavailable. Resume with `after`.',
    ],
  ])('ends with a resume line when the next page is %s', async (_name, thrown, code, message) => {
    const w: Walk = {
      ...walk(),
      fetchPage: async () => {
        throw thrown;
      },
    };
    const out: string[] = [];
    for await (const piece of walkPages(w, smallPage(['a'], true, []), newWalkState())) out.push(piece.toString());
    expect(out.join('')).toBe(
      `{"id":"a"}\n${JSON.stringify({ export: { complete: false, rows: 1, after: 'a', error: { code, message } } })}\n`,
    );
  });

  it('walks the same without gc() (node without --expose-gc)', async () => {
    vi.stubGlobal('gc', undefined);
    const events: string[] = [];
    const out: string[] = [];
    const w = { ...walk(), afterPage: readBufferRelease(new ManualClock(0)) };
    for await (const piece of walkPages(w, smallPage(['a'], false, events), newWalkState())) out.push(piece.toString());
    expect(out.join('')).toBe('{"id":"a"}\n{"export":{"complete":true,"rows":1,"after":null}}\n');
  });
});

describe('RecordCut', () => {
  it('cuts CSV at line ends outside quotes only: a quoted field may hold a line break', () => {
    const csv = 'id,name\r\n1,"Plant ""A""\r\nNorth"\r\n2,"B, Inc"\r\n3,C\r\n';
    const cut = new RecordCut(true);
    const out: string[] = [];
    for (let at = 0; at < csv.length; at += 5) {
      const pieces = cut.take(Buffer.from(csv.slice(at, at + 5)));
      if (pieces.length > 0) out.push(Buffer.concat(pieces).toString());
    }
    expect(out.join('')).toBe(csv);
    expect(out.every((piece) => piece.endsWith('\r\n'))).toBe(true);
    expect(out.some((piece) => piece.endsWith('"Plant ""A""\r\n'))).toBe(false);
    expect(cut.records).toBe(4);
    expect(cut.partial).toBe(false);
  });

  it('holds back the bytes of a record not ended and names the last whole NDJSON record', () => {
    const cut = new RecordCut(false);
    expect(cut.take(Buffer.from('{"id":"a"}\n{"id":"b'))).toEqual([Buffer.from('{"id":"a"}\n')]);
    expect(cut.lastId()).toBe('a');
    expect(cut.partial).toBe(true);
    expect(Buffer.concat(cut.take(Buffer.from('"}\n{"id"')))).toEqual(Buffer.from('{"id":"b"}\n'));
    expect(cut.lastId()).toBe('b');
    expect(cut.records).toBe(2);
    expect(cut.partial).toBe(true);
  });
});

describe('a reader gone while the next page is fetched', () => {
  it('neither counts that page nor hands any of it on, and lets go of its body', async () => {
    const events: string[] = [];
    let gone = false;
    // undici's body is a stream: it must be destroyed, or its connection stays busy.
    const second = Readable.from([Buffer.from('{"id":"c"}\n')]);
    const w: Walk = {
      ...walk(),
      batcher: {
        authorize: async () => {
          events.push('counted');
          return { decision: Decision.ALLOWED };
        },
      } as unknown as AuthorizationBatcher,
      fetchPage: async () => {
        gone = true; // the connection closes while the page is on its way
        return { status: 200, headers: { 'x-export-rows': '1', 'x-export-more': 'false', 'x-export-last': 'c' }, body: second };
      },
      gone: () => gone,
    };
    const out: string[] = [];
    for await (const piece of walkPages(w, smallPage(['a'], true, events), newWalkState())) out.push(piece.toString());
    await new Promise((r) => setImmediate(r));
    expect(out).toEqual(['{"id":"a"}\n']);
    expect(events).toEqual(['read a']);
    expect(second.destroyed).toBe(true);
  });
});

describe('discard', () => {
  it('destroys a page body that is a stream, which a new iterator’s return() would leave open', () => {
    const body = new Readable({ read() {} });
    body.push(Buffer.alloc(1024));
    discard({ status: 200, headers: {}, body });
    expect(body.destroyed).toBe(true);
  });

  it('destroys undici’s body of a page received whole but not read, without an error nobody hears', async () => {
    const server = createServer((_req, res) => res.end('{"error":{}}'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const pool = new Pool(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    try {
      const res = await pool.request({ method: 'GET', path: '/' });
      // The whole answer has come (its 12 bytes buffered): undici's request is complete, the body not read.
      while (res.body.readableLength < 12) await new Promise((r) => setImmediate(r));
      const errors: unknown[] = [];
      const heard = (err: unknown) => errors.push(err);
      process.prependListener('uncaughtException', heard);
      try {
        discard({ status: res.statusCode, headers: {}, body: res.body });
        await new Promise((r) => setImmediate(r));
        await new Promise((r) => setImmediate(r));
      } finally {
        process.off('uncaughtException', heard);
      }
      expect(res.body.destroyed).toBe(true);
      expect(errors).toEqual([]);
    } finally {
      await pool.close();
      server.close();
    }
  });

  it('ends a page body that is only an async iterable', async () => {
    let ended = false;
    async function* body() {
      try {
        yield Buffer.from('a');
        yield Buffer.from('b');
      } finally {
        ended = true;
      }
    }
    const page = { status: 200, headers: {}, body: body() };
    await page.body.next();
    discard(page);
    await new Promise((r) => setImmediate(r));
    expect(ended).toBe(true);
  });
});
