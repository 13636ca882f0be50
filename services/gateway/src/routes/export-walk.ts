import { Decision } from '@fcd/proto';
import { AppError, type Clock, systemClock, UNAUTHORIZED_MESSAGE } from '@fcd/service-kit';
import type { FastifyBaseLogger } from 'fastify';
import type { AuthorizationBatcher } from '../auth/batcher';
import { rateLimited } from '../auth/metering';
import type { UpstreamPage } from '../clients/proxy';
import { RecordCut } from './export-records';

/**
 * The walk over an export's pages (./exports.ts), each page streamed as it is read: a chunk read
 * from the facility service is cut at its last record boundary (./export-records.ts) and handed
 * on, and the next chunk is read only when the reader has taken it (the body's pull, through
 * ./send-guard.ts). So the gateway holds a few chunks of an export, never a page, and no record is
 * half sent: when a page fails part-way, what follows its last whole record is dropped and the
 * resume line names that record (docs/api.md, "Bulk export").
 *
 * After each page the walk calls `afterPage` (`readBufferRelease`): a young collection, at most one
 * per 50 ms for all exports, so that the pages' socket reads are freed while the next ones are
 * read, not whenever V8 next collects.
 */

/** Where the walk is: pieces read and cut but not handed on yet, and what the resume line says. */
export interface WalkState {
  rows: number;
  pending: Buffer[];
  /** The id of the last row handed on at a page's end (x-export-last). */
  last: string | undefined;
  /** Within a page: its rows handed on so far, and the last one's id. */
  cut: RecordCut | undefined;
  /** Rows may follow what was handed on. */
  more: boolean;
  /** The closing line (or the CSV's cut) was handed on. */
  closed: boolean;
}

export interface Walk {
  kind: string;
  publicPath: string;
  key: string;
  csv: boolean;
  log: FastifyBaseLogger;
  batcher: AuthorizationBatcher;
  fetchPage(after: string | undefined, header: boolean): Promise<UpstreamPage>;
  /** Called after each page, whole or failed (the gateway's one `readBufferRelease`). */
  afterPage(): void;
  /** The reader is gone (its response or connection closed): a page fetched now is neither counted nor sent. */
  gone(): boolean;
}

export function newWalkState(): WalkState {
  return { rows: 0, pending: [], last: undefined, cut: undefined, more: true, closed: false };
}

/** The NDJSON closing line: complete, or where to resume (the last whole row handed on) and why not. */
export function line(state: WalkState, error?: AppError): string {
  state.closed = true;
  const after = state.cut?.lastId() ?? state.last ?? null;
  const end = error
    ? { complete: false, rows: state.rows, after, error: { code: error.code, message: error.message } }
    : { complete: true, rows: state.rows, after: null };
  return `${JSON.stringify({ export: end })}\n`;
}

/**
 * Lets go of a page's body not read (its connection is closed, not reused mid-body). A stream
 * (undici's body) is destroyed: `return()` on a new iterator of a Node stream does nothing before
 * the first read, and the upstream connection would stay busy until the facility service gave up.
 */
export function discard(page: UpstreamPage): void {
  const body = page.body as AsyncIterable<Buffer> & { destroy?: () => void; on?: (event: 'error', listener: () => void) => void };
  if (typeof body.destroy === 'function') {
    // undici's body, destroyed before its end was read, emits 'error' (RequestAbortedError); a body
    // received whole has no listener left for it, and an 'error' nobody hears ends the process.
    body.on?.('error', () => undefined);
    body.destroy();
    return;
  }
  body[Symbol.asyncIterator]()
    .return?.()
    ?.catch(() => undefined);
}

const RESUME = 'Resume with `after`.';
const UNAVAILABLE = `The facility service is unavailable. ${RESUME}`;

/** The error of a resume line: the client's answer (already 200) is not retried but resumed. */
function resumable(err: AppError): AppError {
  return new AppError(err.code, `${err.message} ${RESUME}`);
}

/** Least time between two young collections asked for by exports, whatever the number running. */
export const READ_RELEASE_INTERVAL_MS = 50;

/**
 * What the walk calls after each page: a young collection (a scavenge), when node runs with
 * `--expose-gc` (the chart's `gateway.nodeOptions`); without the flag, nothing.
 *
 * undici reads each page from the facility service's socket into buffers of up to 64 KiB outside
 * V8's heap. They are garbage once handed on, but only a collection frees them, and V8 starts a
 * young collection when its heap's young generation fills, not when memory outside the heap grows.
 * An export allocates little on the heap per chunk, so with node's default young generation (two
 * semi-spaces of up to 16 MiB) a 50,000-row export kept about 32 MiB of its reads and peaked at
 * 159 MiB, over its 150 MiB bound. A scavenge per page (1,000 rows, itself a counted request) took
 * 1.2 ms on average and leaves about one page of reads in memory; the young generation keeps its
 * size for the proxied path, which a 4 MiB one slowed (ADR 0015, amended 2026-11-29).
 *
 * A scavenge pauses every request of the process, and one frees the reads of every export at once:
 * so one function per gateway, shared by its exports, asks at most once per `minIntervalMs` (a page
 * of one export takes longer than that to stream).
 */
export function readBufferRelease(clock: Clock = systemClock, minIntervalMs = READ_RELEASE_INTERVAL_MS): () => void {
  let last = Number.NEGATIVE_INFINITY;
  return () => {
    const now = clock.now();
    if (now - last < minIntervalMs) return;
    last = now;
    globalThis.gc?.({ type: 'minor' });
  };
}

/**
 * The next page, counted before any of it is written; an AppError when it cannot be fetched or
 * counted; null when the reader left while it was fetched (pages not sent are not counted).
 */
async function nextPage(w: Walk, after: string | undefined): Promise<UpstreamPage | AppError | null> {
  let next: UpstreamPage;
  try {
    next = await w.fetchPage(after, false);
  } catch (err) {
    // A 503's own message says to retry after a second: the line's says to resume.
    if (err instanceof AppError && err.code !== 'SERVICE_UNAVAILABLE') return resumable(err);
    return new AppError('SERVICE_UNAVAILABLE', UNAVAILABLE);
  }
  if (next.status !== 200) {
    discard(next);
    return new AppError('SERVICE_UNAVAILABLE', UNAVAILABLE);
  }
  if (w.gone()) {
    discard(next);
    return null;
  }
  // Counted before it is written: a page that cannot be counted is not sent.
  const counted = await w.batcher.authorize(w.key, 'GET', w.publicPath);
  if (counted.decision === Decision.ALLOWED) return next;
  discard(next);
  if (counted.decision === Decision.RATE_LIMITED) return resumable(rateLimited(counted));
  // The key was revoked (or expired) during the export.
  if (counted.decision === Decision.UNAUTHENTICATED) return resumable(new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE));
  return new AppError('SERVICE_UNAVAILABLE', `Metering is unavailable. ${RESUME}`);
}

/** Streams one page: true when it ended whole, false when its body failed (or ended inside a record). */
async function* streamPage(page: UpstreamPage, csv: boolean, state: WalkState): AsyncGenerator<Buffer, boolean> {
  const cut = new RecordCut(csv);
  state.cut = cut;
  state.more = true;
  const rowsBefore = state.rows;
  try {
    for await (const chunk of page.body) {
      state.pending = cut.take(chunk as Buffer);
      // Counted as it is queued: what is queued is handed on, now or at a stall's cut.
      state.rows = rowsBefore + cut.records;
      while (state.pending.length > 0) yield state.pending.shift() as Buffer;
    }
  } catch {
    return false;
  }
  if (cut.partial) return false;
  state.rows = rowsBefore + Number(page.headers['x-export-rows'] ?? cut.records);
  state.last = page.headers['x-export-last'] ?? state.last;
  state.cut = undefined;
  state.more = page.headers['x-export-more'] === 'true';
  return true;
}

export async function* walkPages(w: Walk, first: UpstreamPage, state: WalkState): AsyncGenerator<Buffer | string, void> {
  let page = first;
  for (;;) {
    const whole = yield* streamPage(page, w.csv, state);
    w.afterPage();
    let stop: AppError | undefined = whole ? undefined : new AppError('SERVICE_UNAVAILABLE', UNAVAILABLE);
    if (whole && !state.more) break;
    if (!stop) {
      const next = await nextPage(w, state.last);
      if (next === null) return;
      if (next instanceof AppError) stop = next;
      else page = next;
    }
    if (stop) {
      w.log.warn({ kind: w.kind, rows: state.rows, code: stop.code }, 'export stopped before its end');
      // CSV has no place for the reason: the response is cut, and the client resumes from its last row.
      if (w.csv) throw stop;
      yield line(state, stop);
      return;
    }
  }
  if (!w.csv) yield line(state);
}
