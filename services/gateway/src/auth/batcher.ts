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

interface InFlight {
  waiters: Waiter[];
  timer: NodeJS.Timeout;
  /** When the batch fails as UNAVAILABLE if unanswered (a resend keeps the original deadline). */
  deadlineAt: number;
  /** Sent again after its stream ended cleanly without answering it (at most once). */
  resent: boolean;
}

const tracer = trace.getTracer('@fcd/gateway');
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
export function countByMargin(deadlineMs: number): number {
  return Math.min(500, Math.floor(deadlineMs / 4));
}

const UNAVAILABLE = () => create(AuthorizeResultSchema, { decision: Decision.UNAVAILABLE, retryAfterSeconds: 1 });

/**
 * Coalesces the authorizations of one event-loop turn into one message on a
 * long-lived bidirectional stream to the usage service (ARCHITECTURE.md, "The
 * hot path"). Each batch has a deadline; when the stream breaks, its batches
 * fail as UNAVAILABLE and the next batch opens a new stream.
 */
export class AuthorizationBatcher {
  private queue: Waiter[] = [];
  private scheduled = false;
  private stream: grpc.ClientDuplexStream<AuthorizeStreamRequest, AuthorizeStreamResponse> | undefined;
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
    },
  ) {}

  authorize(apiKey: string, method: string, path: string, includeUsage = false): Promise<AuthorizeResult> {
    if (this.closed) return Promise.resolve(UNAVAILABLE());
    // One client span per authorization; its context travels in the item (the stream is shared by many requests).
    const span = tracer.startSpan(`${RPC_ATTRIBUTES['rpc.service']}/AuthorizeStream`, {
      kind: SpanKind.CLIENT,
      attributes: RPC_ATTRIBUTES,
    });
    const { traceparent = '', tracestate = '' } = injectTraceContext(trace.setSpan(context.active(), span));
    return new Promise((resolve) => {
      const item = create(AuthorizeItemSchema, {
        apiKey: apiKey.slice(0, MAX_KEY_CHARS),
        method: method.slice(0, 16),
        path: path.slice(0, MAX_PATH_CHARS),
        includeUsage,
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
    const stream = this.ensureStream();
    const batchId = this.nextBatchId;
    this.nextBatchId = this.nextBatchId >= 0xffffffff ? 1 : this.nextBatchId + 1;
    const deadlineAt = resend?.deadlineAt ?? Date.now() + this.options.deadlineMs;
    const timer = setTimeout(() => this.fail(batchId, 'deadline exceeded'), Math.max(0, deadlineAt - Date.now()));
    this.inFlight.set(batchId, { waiters, timer, deadlineAt, resent: resend !== undefined });
    if (!resend) this.options.onBatch?.(waiters.length);
    try {
      stream.write(
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

  private ensureStream(): grpc.ClientDuplexStream<AuthorizeStreamRequest, AuthorizeStreamResponse> {
    if (this.stream) return this.stream;
    const stream = this.client.bidi('authorizeStream');
    stream.on('data', (res: AuthorizeStreamResponse) => {
      const entry = this.inFlight.get(res.batchId);
      if (!entry) return; // answered after its deadline
      this.inFlight.delete(res.batchId);
      clearTimeout(entry.timer);
      entry.waiters.forEach((w, i) => {
        w.resolve(res.results[i] ?? UNAVAILABLE());
      });
    });
    const broken = (reason: string, clean: boolean) => {
      if (this.stream !== stream) return;
      this.stream = undefined;
      if (this.closed) {
        for (const id of [...this.inFlight.keys()]) this.fail(id, reason);
        return;
      }
      // A stream the usage service ended cleanly (status OK: it is shutting down) leaves the batches
      // it did not answer uncounted (services/usage/src/grpc/server.ts), so they are sent once more
      // on a new stream, which grpc-js opens on a new connection after the server's GOAWAY. Any
      // other break may have cut a batch that was counted: those fail as UNAVAILABLE (a 503).
      const unanswered = [...this.inFlight.entries()];
      if (!clean) this.logger.warn({ reason }, 'authorization stream closed; failing its pending batches');
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
    stream.on('status', (status: grpc.StatusObject) => broken(`stream ended: ${grpc.status[status.code]}`, status.code === grpc.status.OK));
    stream.on('close', () => broken('stream closed', false));
    this.stream = stream;
    return stream;
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
    this.stream?.end();
    this.stream = undefined;
  }
}
