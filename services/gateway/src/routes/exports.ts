import type { Socket } from 'node:net';
import { AppError, type InternalAuth, serviceUnavailable, UNAUTHORIZED_MESSAGE, validationError } from '@fcd/service-kit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AuthorizationBatcher } from '../auth/batcher';
import { readWhole, sendAnswer, type Upstream, type UpstreamPage } from '../clients/proxy';
import type { ExportSlot, ExportSlots } from '../store/export-slots';
import { discard, line, newWalkState, readBufferRelease, type Walk, walkPages } from './export-walk';
import { SendGuard } from './send-guard';
import { EXPORT_KINDS, EXPORT_PAGE_ROWS } from './table';

/**
 * GET /v1/exports/{facilities,violations,cases} (Pro and above; docs/api.md, "Bulk export";
 * docs/metering.md, "Exports"; ADR 0005).
 *
 * The gateway walks the facility service's export pages of 1,000 rows (keyset on id) and streams
 * each as it is read, whole records only, a chunk at a time as the reader takes them
 * (./export-walk.ts): memory is a few chunks, not a page. The request's own authorization counts
 * the first page; every further page is counted with an ordinary authorization item when its
 * headers arrive, *before* any of it is written, so an export of N rows is counted exactly
 * ⌈N / 1000⌉ times (at least once) and a page that could not be counted is never sent. When a page
 * cannot be fetched or counted, or fails part-way, the export stops after the last whole record:
 * NDJSON ends with a line `{"export":{"complete":false,"rows":…,"after":"<id>","error":…}}`; CSV,
 * which has no place for it, is cut (no terminating chunk). Either way `after=<id of the last row
 * received>` resumes with no gap and no duplicate. A complete NDJSON export ends with
 * `{"export":{"complete":true,"rows":…,"after":null}}`.
 *
 * Bounded (docs/api.md, "Bulk export"): at most `concurrency` exports of one account at once,
 * across replicas (store/export-slots.ts; the next is 429 CONCURRENCY_LIMIT_EXCEEDED), and a
 * reader that takes nothing for `sendTimeoutMs` is cut (./send-guard.ts): no further page is
 * fetched, the pieces already cut and the resume line (error REQUEST_TIMEOUT) are queued,
 * and the connection is closed `graceMs` later if the reader has not taken them.
 */
const RESERVED = ['page_size', 'format', 'header'];

/**
 * What to run when a connection closes, for the exports pipelined on it: one 'close' listener per
 * connection, however many exports it holds at once (one each passed Node's bound of ten).
 */
const onConnectionClose = new WeakMap<Socket, Set<() => void>>();

/** Runs `fn` when `socket` closes; returns what cancels that. */
function whenClosed(socket: Socket, fn: () => void): () => void {
  let pending = onConnectionClose.get(socket);
  if (!pending) {
    const set = new Set<() => void>();
    onConnectionClose.set(socket, set);
    socket.once('close', () => {
      onConnectionClose.delete(socket);
      for (const f of set) f();
    });
    pending = set;
  }
  const set = pending;
  set.add(fn);
  return () => set.delete(fn);
}
/** Retry-After of a refused export: when one of the account's running exports ends is unknown. */
const CONCURRENCY_RETRY_AFTER_SECONDS = 5;

export interface ExportLimits {
  slots: Pick<ExportSlots, 'acquire'>;
  /** Exports at once per account: Pro (tier rank 1), Enterprise (2 and above). */
  concurrency: { pro: number; enterprise: number };
  /** Exports this gateway runs at once, all accounts together (their memory's bound). */
  perReplica: number;
  sendTimeoutMs: number;
  graceMs: number;
}

export interface ExportDeps {
  facility: Upstream;
  internalAuth: InternalAuth;
  batcher: AuthorizationBatcher;
  limits: ExportLimits;
}

function wantsCsv(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return /(^|,)\s*text\/csv\s*(;|,|$)/i.test(accept);
}

/** The account's slot, or the 429 (or 503 when Redis cannot say). */
async function acquireSlot(limits: ExportLimits, accountId: string, tierRank: number): Promise<ExportSlot> {
  const limit = tierRank >= 2 ? limits.concurrency.enterprise : limits.concurrency.pro;
  let slot: ExportSlot | null;
  try {
    slot = await limits.slots.acquire(accountId, limit);
  } catch (err) {
    throw serviceUnavailable('redis', 1, err);
  }
  if (slot) return slot;
  throw new AppError(
    'CONCURRENCY_LIMIT_EXCEEDED',
    `At most ${limit} exports of this account may run at once. Retry when one of them has ended.`,
    { details: { limit }, retryAfterSeconds: CONCURRENCY_RETRY_AFTER_SECONDS },
  );
}

/** The body of a started export: its pages, behind the send timeout. */
function exportBody(w: Walk, first: UpstreamPage, reply: FastifyReply, limits: ExportLimits): SendGuard {
  const state = newWalkState();
  return new SendGuard(walkPages(w, first, state), {
    sendTimeoutMs: limits.sendTimeoutMs,
    onStall: () => {
      w.log.warn({ kind: w.kind, rows: state.rows, timeout_ms: limits.sendTimeoutMs }, 'export reader stalled: cut');
      // What the reader has not taken after the grace cannot be delivered: the connection goes.
      // The socket itself, not the response: a response queued behind an earlier pipelined answer
      // the client does not read has no socket, and destroying it would wait for one for good
      // (its 'close', which gives back the slot, with it).
      const grace = setTimeout(() => {
        w.log.info({ kind: w.kind }, 'export reader took nothing more: connection closed');
        reply.request.raw.socket.destroy();
      }, limits.graceMs);
      reply.raw.once('close', () => clearTimeout(grace));
      if (w.csv) return null;
      const rest: Array<Buffer | string> = state.pending.splice(0);
      if (state.closed) return rest;
      const seconds = limits.sendTimeoutMs / 1000;
      const timeout = new AppError('REQUEST_TIMEOUT', `The export was not read for ${seconds} s. Resume with \`after\`.`);
      rest.push(state.more ? line(state, timeout) : line(state));
      return rest;
    },
  });
}

/**
 * An export's places: one of the replica's and its account's slot, held until the response closes,
 * however it ends (complete, stopped, cut, or the client gone), or the connection does: a response
 * queued behind an earlier pipelined answer that never finished never gets the socket, nor closes.
 * Letting go (once) also stops the body: no page more.
 */
interface Places {
  released: boolean;
  slot: ExportSlot | undefined;
  body: SendGuard | undefined;
  release(): void;
}

function holdPlaces(request: FastifyRequest, reply: FastifyReply, onRelease: () => void): Places {
  const places: Places = {
    released: false,
    slot: undefined,
    body: undefined,
    release: () => {
      if (places.released) return;
      places.released = true;
      onRelease();
      places.slot?.release();
      places.body?.destroy();
    },
  };
  const socket = request.raw.socket;
  if (reply.raw.closed || socket.destroyed) places.release();
  else {
    const cancel = whenClosed(socket, places.release);
    reply.raw.once('close', () => {
      cancel();
      places.release();
    });
  }
  return places;
}

/** The fetch of one page of the export from the facility service, signed for the caller. */
function pageFetcher(
  deps: ExportDeps,
  kind: string,
  query: URLSearchParams,
  account: NonNullable<FastifyRequest['account']>,
  request: FastifyRequest,
): Walk['fetchPage'] {
  return (after, header) => {
    const q = new URLSearchParams(query);
    if (after !== undefined) q.set('after', after);
    if (header) q.set('header', 'true');
    const path = `/internal/v1/exports/${kind}?${q}`;
    const signed = deps.internalAuth.sign(
      { account_id: account.accountId, tier: account.tier, tier_rank: account.tierRank, request_id: request.id },
      { audience: deps.facility.name, method: 'GET', path },
    );
    return deps.facility.getInternal(path, signed, request.id, request.log);
  };
}

export function registerExports(app: FastifyInstance, deps: ExportDeps): void {
  let running = 0;
  // One for all of this gateway's exports: a young collection frees every export's reads at once.
  const afterPage = readBufferRelease();
  for (const kind of EXPORT_KINDS) {
    const publicPath = `/v1/exports/${kind}`;
    app.get(publicPath, async (request, reply) => {
      const account = request.account;
      const apiKey = request.meterKey;
      if (!account || !apiKey) throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
      const query = new URLSearchParams(request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '');
      const reserved = RESERVED.filter((name) => query.has(name));
      if (reserved.length > 0) throw validationError(reserved.map((field) => ({ field, message: 'is not a parameter of this endpoint' })));
      const csv = wantsCsv(request);
      query.set('page_size', String(EXPORT_PAGE_ROWS));
      query.set('format', csv ? 'csv' : 'ndjson');

      if (running >= deps.limits.perReplica) throw serviceUnavailable('gateway: exports at capacity', CONCURRENCY_RETRY_AFTER_SECONDS);
      running++;
      const places = holdPlaces(request, reply, () => running--);
      let slot: ExportSlot;
      try {
        slot = await acquireSlot(deps.limits, account.accountId, account.tierRank);
      } catch (err) {
        // Refused (429, 503): no export runs, whenever its answer is written.
        places.release();
        throw err;
      }
      places.slot = slot;
      if (places.released) {
        // The connection went meanwhile: no page is fetched for nobody.
        slot.release();
        return reply.send();
      }
      const fetchPage = pageFetcher(deps, kind, query, account, request);

      // The first page answers for the request: a bad filter or cursor is its 400, an outage its 503.
      // Without a walk to follow, the places go at once, whenever the answer is written.
      const first = await fetchPage(query.get('after') ?? undefined, csv).catch((err: unknown) => {
        places.release();
        throw err;
      });
      if (first.status !== 200) {
        const body = await readWhole(first.body).finally(places.release);
        return sendAnswer(reply, { status: first.status, headers: first.headers, body });
      }
      reply.header('content-type', csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson');
      reply.header('cache-control', 'private, no-store');
      if (request.method === 'HEAD') {
        discard(first);
        places.release();
        return reply.send();
      }

      if (places.released) {
        // The connection went while the first page was read: nobody to send it to.
        discard(first);
        return reply.send();
      }
      const gone = () => places.released;
      const walk: Walk = { kind, publicPath, key: apiKey, csv, log: request.log, batcher: deps.batcher, fetchPage, afterPage, gone };
      places.body = exportBody(walk, first, reply, deps.limits);
      return reply.send(places.body);
    });
  }
}
