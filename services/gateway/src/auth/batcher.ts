import { create } from '@bufbuild/protobuf';
import { grpc, type TypedClient } from '@fcd/grpc';
import {
  type AuthorizeItem,
  AuthorizeItemSchema,
  type AuthorizeResult,
  AuthorizeResultSchema,
  type AuthorizeStreamRequest,
  AuthorizeStreamRequestSchema,
  type AuthorizeStreamResponse,
  Decision,
  UsageService,
} from '@fcd/proto';
import { context, injectTraceContext, SpanKind, SpanStatusCode, trace } from '@fcd/service-kit';
import type { Logger } from 'pino';

interface Waiter {
  item: AuthorizeItem;
  resolve: (r: AuthorizeResult) => void;
}

type AuthorizeStream = grpc.ClientDuplexStream<AuthorizeStreamRequest, AuthorizeStreamResponse>;

/** One authorization stream of the batcher's pool. */
interface Lane {
  stream: AuthorizeStream;
  /** When it stops taking new batches (then it is half-closed: usage answers what it has, then ends it). */
  retireAt: number;
  /** Half-closed by this batcher (its age), rather than ended by the usage service. */
  retired: boolean;
  ended: boolean;
}

interface InFlight {
  lane: Lane;
  waiters: Waiter[];
  timer: NodeJS.Timeout;
  /** When the batch fails as UNAVAILABLE if unanswered (a resend keeps the original deadline). */
  deadlineAt: number;
  /** Sent again after its stream ended cleanly without answering it (at most once). */
  resent: boolean;
}

const tracer = trace.getTracer('@fcd/gateway');
const NO_TRACE_CONTEXT: { traceparent?: string; tracestate?: string } = {};
const RPC_ATTRIBUTES = { 'rpc.system': 'grpc', 'rpc.service': UsageService.typeName, 'rpc.method': 'AuthorizeStream' };

/**
 * Bounds on what one item carries, so a full batch stays far below the usage service's message cap
 * (4 MiB) whatever clients send: a key longer than the key format (36 characters) is refused
 * whatever follows its 64th character, and the path and tracestate only label traces.
 */
const MAX_KEY_CHARS = 64;
const MAX_PATH_CHARS = 256;
const MAX_TRACESTATE_CHARS = 256;

/**
 * A batch travels with its count-by time: usage counts its items only if Redis runs the counting
 * before then (docs/metering.md, "Counting follows the answer"). It is this much earlier than the
 * time the gateway stops waiting and answers 503, so an item counted just in time is also answered
 * in time: a quarter of the deadline, at most 500 ms.
 */
function countByMargin(deadlineMs: number): number {
  return Math.min(500, Math.floor(deadlineMs / 4));
}

const UNAVAILABLE = () => create(AuthorizeResultSchema, { decision: Decision.UNAVAILABLE, retryAfterSeconds: 1 });

/**
 * Coalesces the authorizations of one event-loop turn into one message on a
 * long-lived bidirectional stream to the usage service (docs/architecture.md, "One
 * request"; ADR 0006). Each batch has a deadline; when the stream breaks, its batches
 * fail as UNAVAILABLE and the next batch opens a new stream.
 *
 * Balanced (ADR 0011): the batcher keeps a pool of `streams` streams and sends
 * each batch on the next one in turn. With a `round_robin` channel over every
 * usage replica, each new stream goes to the next replica, so the batches are
 * spread across them. A stream older than `streamMaxAgeMs` takes no new batch
 * and is half-closed (usage answers what it has, then ends it cleanly): its
 * replacement is placed again, so a replica added later gets its share, and
 * a stream never outlives the usage server's connection-age grace.
 */
export class AuthorizationBatcher {
  private queue: Waiter[] = [];
  private scheduled = false;
  /** Open streams taking batches, in turn. */
  private lanes: Lane[] = [];
  private cursor = 0;
  private nextBatchId = 1;
  private readonly inFlight = new Map<number, InFlight>();
  private closed = false;

  constructor(
    private readonly client: TypedClient<typeof UsageService>,
    private readonly logger: Logger,
    private readonly options: {
      deadlineMs: number;
      maxBatch: number;
      onBatch?: (size: number) => void;
      /** Batches sent again after a usage replica ended their stream cleanly (it was draining). */
      onResend?: (batches: number) => void;
      /** Streams kept open, batches sent on each in turn (default 1). */
      streams?: number;
      /** A stream takes new batches for this long (give or take a fifth, so they retire apart), then is closed; 0 = for good. */
      streamMaxAgeMs?: number;
    },
  ) {}

  /** `peek`: authenticate and apply the hard limit without counting (a conditional GET; docs/metering.md). */
  authorize(apiKey: string, method: string, path: string, includeUsage = false, peek = false): Promise<AuthorizeResult> {
    if (this.closed) return Promise.resolve(UNAVAILABLE());
    // One client span per authorization; its context travels in the item (the stream is shared by many requests).
    const span = tracer.startSpan(`${RPC_ATTRIBUTES['rpc.service']}/AuthorizeStream`, {
      kind: SpanKind.CLIENT,
      attributes: RPC_ATTRIBUTES,
    });
    // W3C trace context is written only for a valid span context: without one (not tracing) there
    // is nothing to carry, and no context and carrier are made for it.
    const { traceparent = '', tracestate = '' } = trace.isSpanContextValid(span.spanContext())
      ? injectTraceContext(trace.setSpan(context.active(), span))
      : NO_TRACE_CONTEXT;
    return new Promise((resolve) => {
      const item = create(AuthorizeItemSchema, {
        apiKey: apiKey.slice(0, MAX_KEY_CHARS),
        method: method.slice(0, 16),
        path: path.slice(0, MAX_PATH_CHARS),
        includeUsage,
        peek,
        traceparent,
        tracestate: tracestate.length <= MAX_TRACESTATE_CHARS ? tracestate : '',
      });
      this.queue.push({
        item,
        resolve: (r) => {
          span.setAttribute('fcd.authorize.decision', Decision[r.decision] ?? String(r.decision));
          if (r.decision === Decision.UNAVAILABLE) span.setStatus({ code: SpanStatusCode.ERROR, message: 'usage unavailable' });
          span.end();
          resolve(r);
        },
      });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const waiters = this.queue.splice(0, this.options.maxBatch);
      this.send(waiters);
    }
  }

  private send(waiters: Waiter[], resend?: { deadlineAt: number }): void {
    const lane = this.pickLane();
    const batchId = this.nextBatchId;
    this.nextBatchId = this.nextBatchId >= 0xffffffff ? 1 : this.nextBatchId + 1;
    const deadlineAt = resend?.deadlineAt ?? Date.now() + this.options.deadlineMs;
    const timer = setTimeout(() => this.fail(batchId, 'deadline exceeded'), Math.max(0, deadlineAt - Date.now()));
    this.inFlight.set(batchId, { lane, waiters, timer, deadlineAt, resent: resend !== undefined });
    if (!resend) this.options.onBatch?.(waiters.length);
    try {
      lane.stream.write(
        create(AuthorizeStreamRequestSchema, {
          batchId,
          items: waiters.map((w) => w.item),
          countByUnixMs: BigInt(deadlineAt - countByMargin(this.options.deadlineMs)),
        }),
      );
    } catch (err) {
      this.fail(batchId, (err as Error).message);
    }
  }

  /** Fails a batch's callers as UNAVAILABLE (the gateway answers 503 with Retry-After). */
  private failWaiters(waiters: Waiter[], reason: string): void {
    this.logger.debug({ reason }, 'authorization batch failed');
    for (const w of waiters) w.resolve(UNAVAILABLE());
  }

  /** The stream for the next batch: streams past their age retire, the pool is filled up, then each in turn. */
  private pickLane(): Lane {
    const now = Date.now();
    for (const lane of [...this.lanes]) if (now >= lane.retireAt) this.retire(lane);
    if (this.lanes.length < Math.max(1, this.options.streams ?? 1)) return this.openLane();
    this.cursor = (this.cursor + 1) % this.lanes.length;
    return this.lanes[this.cursor] as Lane;
  }

  /** No new batches on it; half-closed, so usage answers the batches it has and ends it cleanly. */
  private retire(lane: Lane): void {
    this.lanes = this.lanes.filter((l) => l !== lane);
    lane.retired = true;
    try {
      lane.stream.end();
    } catch {
      // already closed: its status event settles its batches
    }
  }

  private openLane(): Lane {
    const maxAge = this.options.streamMaxAgeMs ?? 0;
    const stream = this.client.bidi('authorizeStream');
    const lane: Lane = {
      stream,
      retireAt: maxAge > 0 ? Date.now() + Math.round(maxAge * (0.8 + Math.random() * 0.2)) : Number.POSITIVE_INFINITY,
      retired: false,
      ended: false,
    };
    stream.on('data', (res: AuthorizeStreamResponse) => {
      const entry = this.inFlight.get(res.batchId);
      if (!entry) return; // answered after its deadline
      this.inFlight.delete(res.batchId);
      clearTimeout(entry.timer);
      entry.waiters.forEach((w, i) => {
        w.resolve(res.results[i] ?? UNAVAILABLE());
      });
    });
    const broken = (reason: string, clean: boolean, status: 'ok' | 'refused' | 'other' = 'other') => {
      if (lane.ended) return;
      lane.ended = true;
      this.lanes = this.lanes.filter((l) => l !== lane);
      const unanswered = [...this.inFlight.entries()].filter(([, entry]) => entry.lane === lane);
      if (this.closed) {
        for (const [id] of unanswered) this.fail(id, reason);
        return;
      }
      // A stream the usage service ended cleanly (status OK: it is shutting down, or it answered
      // everything after this batcher half-closed it), or refused, leaves the batches it did not answer
      // uncounted (services/usage/src/grpc/server.ts), so they are sent once more on another
      // stream, which grpc-js opens on a new connection after the server's GOAWAY. Any other break
      // may have cut a batch that was counted: those fail as UNAVAILABLE (a 503).
      if (!clean) this.logger.warn({ reason }, 'authorization stream closed; failing its pending batches');
      // Ended cleanly by usage without being asked: that replica is draining, and other streams of
      // the pool may be on it too. They all retire (each is answered, then ended), so the resent
      // batches and the next ones go on new streams, which grpc-js places on connections that did
      // not get the GOAWAY.
      if (clean && !lane.retired && status === 'ok') for (const other of [...this.lanes]) this.retire(other);
      const resend: InFlight[] = [];
      for (const [id, entry] of unanswered) {
        if (clean && !entry.resent && entry.deadlineAt > Date.now()) {
          this.inFlight.delete(id);
          clearTimeout(entry.timer);
          resend.push(entry);
        } else {
          this.fail(id, reason);
        }
      }
      if (resend.length === 0) return;
      this.logger.info({ batches: resend.length }, 'usage replica ended the authorization stream; resending its unanswered batches');
      this.options.onResend?.(resend.length);
      for (const entry of resend) {
        try {
          this.send(entry.waiters, { deadlineAt: entry.deadlineAt });
        } catch (err) {
          this.failWaiters(entry.waiters, (err as Error).message); // no stream could be opened
        }
      }
    };
    // grpc-js reports the end of a call with 'status' (after 'error' for a non-OK status); 'close' is the fallback.
    stream.on('error', (err: Error) => this.logger.debug({ reason: err.message }, 'authorization stream error'));
    // A stream refused by HTTP/2 (REFUSED_STREAM: a connection at its max age had sent GOAWAY as the
    // stream started) never reached the usage service: as safe to resend as a clean end.
    const refused = (status: grpc.StatusObject) => status.code === grpc.status.UNAVAILABLE && status.details === 'Stream refused by server';
    stream.on('status', (status: grpc.StatusObject) =>
      broken(
        `stream ended: ${grpc.status[status.code]} (${status.details})`,
        status.code === grpc.status.OK || refused(status),
        status.code === grpc.status.OK ? 'ok' : refused(status) ? 'refused' : 'other',
      ),
    );
    stream.on('close', () => broken('stream closed', false));
    this.lanes.push(lane);
    this.cursor = this.lanes.length - 1;
    return lane;
  }

  private fail(batchId: number, reason: string): void {
    const entry = this.inFlight.get(batchId);
    if (!entry) return;
    this.inFlight.delete(batchId);
    clearTimeout(entry.timer);
    this.failWaiters(entry.waiters, reason);
  }

  /** Waits (bounded) for in-flight batches, then closes the stream. */
  async close(timeoutMs = 2000): Promise<void> {
    this.closed = true;
    const until = Date.now() + timeoutMs;
    while (this.inFlight.size > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    for (const id of [...this.inFlight.keys()]) this.fail(id, 'gateway shutting down');
    for (const lane of this.lanes) lane.stream.end();
    this.lanes = [];
  }
}
