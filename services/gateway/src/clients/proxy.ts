import type { IncomingHttpHeaders } from 'node:http';
import { AppError, resetBeforeAnswer, sendOnceMoreAfterReset, serviceUnavailable } from '@fcd/service-kit';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { type Dispatcher, Pool } from 'undici';

const PASS_HEADERS = ['content-type', 'location', 'retry-after', 'allow', 'link'];

/** An upstream's answer as the gateway passes it on. */
export interface UpstreamAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * An export page, its headers read and its body not: the body is read chunk by chunk as the
 * client takes them (the socket is paused meanwhile), so no page is ever held whole. Reading it
 * throws when the connection fails part-way; leaving it unread ends with the iterator's `return`.
 */
export interface UpstreamPage {
  status: number;
  headers: Record<string, string>;
  body: AsyncIterable<Buffer>;
}

/** A (small) body read whole: an export's refusal. Throws 503 when it cannot be read. */
export async function readWhole(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of body) chunks.push(chunk);
  } catch (err) {
    throw serviceUnavailable('facility', 1, err);
  }
  return Buffer.concat(chunks);
}

/** An answer read whole by `readAnswer`. */
interface WholeAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * Whether a request begun at `since` that failed with `err` before any byte of its answer is sent
 * once more: a read (GET, HEAD) whose connection closed or was reset soon after the call began
 * (`resetBeforeAnswer`), once. A read is safe to repeat; a write is not, as the upstream may have
 * run it. Each attempt has its own timeout.
 */
function resendable(method: string, err: Error, since: number): boolean {
  return (method === 'GET' || method === 'HEAD') && resetBeforeAnswer(err, since);
}

/** The connection failed after the answer's headers: the body was cut off part-way. */
class BodyCutOff extends Error {
  constructor(cause: Error) {
    super(cause.message, { cause });
  }
}

/**
 * One request through `pool`, its answer read whole: undici's dispatch with a handler that keeps
 * the chunks, rather than `request()` and its body stream, whose Readable, AsyncResource and
 * promise hops cost about 3 µs of the gateway's CPU per proxied request
 * (docs/benchmarks/history/2026-11-29.md). A read whose connection closed before its answer
 * began is sent once more (`resendable`). Rejects with the error of a failed request, or a
 * BodyCutOff when it failed once the headers had come; `signal` aborts it either way.
 */
function readAnswer(
  pool: Pool,
  options: Dispatcher.DispatchOptions,
  signal: AbortSignal | undefined,
  onResend: (() => void) | undefined,
): Promise<WholeAnswer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let statusCode = 0;
    let headers: IncomingHttpHeaders = {};
    let started = false;
    let controller: Dispatcher.DispatchController | undefined;
    const settle = () => signal?.removeEventListener('abort', onAbort);
    const onAbort = () => {
      if (controller) return controller.abort(signal?.reason);
      // Still queued for a connection: the caller's wait ends now (a write's total bound), and
      // the request is dropped as it starts (onRequestStart); its later error settles nothing.
      settle();
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    let resends = 1;
    const since = performance.now();
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (signal?.aborted) c.abort(signal.reason);
      },
      onResponseStart(_c, status, responseHeaders) {
        // An informational answer (102, 103) is not the answer, and its headers are not passed on.
        if (status < 200) return;
        statusCode = status;
        headers = responseHeaders;
        started = true;
      },
      onResponseData(_c, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        settle();
        resolve({ statusCode, headers, body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks) });
      },
      onResponseError(_c, err) {
        if (!started && resends > 0 && resendable(options.method, err, since)) {
          resends--;
          onResend?.();
          // After a turn of I/O, not from within undici's close of the failed connection: the
          // replica's closes of other connections sent at the same time are seen by then.
          setImmediate(() => pool.dispatch(options, handler));
          return;
        }
        settle();
        reject(started ? new BodyCutOff(err) : err);
      },
    };
    pool.dispatch(options, handler);
  });
}

export function sendAnswer(reply: FastifyReply, answer: UpstreamAnswer): FastifyReply {
  for (const [name, v] of Object.entries(answer.headers)) reply.header(name, v);
  reply.code(answer.status);
  return answer.status === 204 || answer.body.length === 0 ? reply.send() : reply.send(answer.body);
}

/**
 * A domain service behind the gateway: a keep-alive connection pool, the
 * signed account header, and the body re-serialised from the parsed JSON.
 *
 * `timeoutMs` bounds the wait for an answer's headers and each silence within its body (the pool's
 * own coarse timers, to about a second). A write (any method but GET and HEAD) must also end within
 * it in total, since an idempotent POST's key lease (`timeoutMs` + 5 s) must outlive the wait: it
 * gets a timeout signal of its own, whose timer outlives the call. One on every read cost about a
 * tenth of the gateway's CPU per proxied request (docs/benchmarks/history/2026-11-27.md,
 * "16:55–17:25").
 */
export class Upstream {
  private readonly pool: Pool;
  /**
   * Export pages' own connections: a page is read as slowly as its client takes it, holding its
   * connection meanwhile, so exports must not take the proxied path's. Not capped here: the
   * gateway's exports at once (EXPORT_MAX_PER_REPLICA) bound them.
   */
  private readonly pages: Pool;

  /**
   * `onResend` is called for each request sent once more after a reset (the gateway's
   * `fcd_gateway_upstream_resent_requests_total`).
   */
  constructor(
    readonly name: string,
    readonly baseUrl: string,
    private readonly timeoutMs: number,
    connections: number,
    private readonly onResend?: () => void,
  ) {
    this.pool = new Pool(baseUrl, {
      connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      connectTimeout: 5_000,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    // The body timeout counts silence while the body flows, not while it is paused for the client.
    this.pages = new Pool(baseUrl, {
      pipelining: 1,
      keepAliveTimeout: 30_000,
      connectTimeout: 5_000,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  async forward(request: FastifyRequest, reply: FastifyReply, accountHeader: string, method = request.method): Promise<FastifyReply> {
    return sendAnswer(reply, await this.call(request, accountHeader, method));
  }

  /**
   * The upstream's answer, read whole (status, the headers passed on, the body). Throws the
   * AppError the client gets when the upstream is unreachable or fails. A write ends within
   * `timeoutMs` in total (see the class).
   */
  async call(request: FastifyRequest, accountHeader: string, method = request.method): Promise<UpstreamAnswer> {
    const headers: Record<string, string> = {
      'x-request-id': request.id,
      'x-fcd-account': accountHeader,
      accept: 'application/json',
    };
    let body: string | undefined;
    if (request.body !== undefined && request.body !== null) {
      body = JSON.stringify(request.body);
      headers['content-type'] = 'application/json';
    }
    let res: WholeAnswer;
    try {
      res = await readAnswer(
        this.pool,
        { method: method as 'GET', path: request.url, headers, body },
        method === 'GET' || method === 'HEAD' ? undefined : AbortSignal.timeout(this.timeoutMs),
        this.onResend,
      );
    } catch (err) {
      if (!(err instanceof BodyCutOff)) {
        request.log.warn({ upstream: this.name, err: { message: (err as Error).message } }, 'upstream unavailable');
      }
      throw serviceUnavailable(this.name, 1, err);
    }
    const fault = this.internalFault(res.statusCode, request.id, request.log);
    if (fault) throw fault;
    const passed: Record<string, string> = {};
    for (const name of PASS_HEADERS) {
      const v = res.headers[name];
      if (typeof v === 'string') passed[name] = v;
    }
    return { status: res.statusCode, headers: passed, body: res.body };
  }

  /**
   * GET of an internal path (an export page) with the signed account header: status, every
   * `x-export-*` header, and the body to read (UpstreamPage); sent once more when its connection
   * closed before the answer began, as a proxied read is. Throws the client's AppError when the
   * upstream is unreachable or fails.
   */
  async getInternal(path: string, accountHeader: string, requestId: string, log: FastifyBaseLogger): Promise<UpstreamPage> {
    const options: Dispatcher.RequestOptions = {
      method: 'GET',
      path,
      headers: { 'x-request-id': requestId, 'x-fcd-account': accountHeader, accept: '*/*' },
    };
    let res: Awaited<ReturnType<Pool['request']>>;
    try {
      res = await sendOnceMoreAfterReset(() => this.pages.request(options), this.onResend);
    } catch (err) {
      throw serviceUnavailable(this.name, 1, err);
    }
    const fault = this.internalFault(res.statusCode, requestId, log);
    if (fault) {
      await res.body.dump().catch(() => undefined);
      throw fault;
    }
    const headers: Record<string, string> = {};
    for (const [name, v] of Object.entries(res.headers)) {
      if (typeof v === 'string' && (name.startsWith('x-export-') || PASS_HEADERS.includes(name))) headers[name] = v;
    }
    return { status: res.statusCode, headers, body: res.body };
  }

  /**
   * The client's error, logged, for an upstream answer that is an internal fault; else undefined.
   * The client's key was accepted here: a domain service refusing the signed account header is an
   * internal fault (secrets that differ, or a request queued past the header's few seconds), and
   * its 408 says it did not read the gateway's request in time. Either way the client gets a
   * retryable 503, never a 401 or 408 that would blame its key or its connection. A 5xx other than
   * 503 is the client's 500, with the request id to quote.
   */
  private internalFault(status: number, requestId: string, log: FastifyBaseLogger): AppError | undefined {
    if (status === 401 || status === 408) {
      const message = status === 401 ? 'upstream refused the signed account header' : 'upstream did not read the request in time';
      log.error({ upstream: this.name, status }, message);
      return serviceUnavailable(this.name, 1);
    }
    if (status >= 500 && status !== 503) {
      log.error({ upstream: this.name, status }, 'upstream error');
      return new AppError('INTERNAL_ERROR', `An internal error occurred. Quote request id ${requestId} when reporting it.`);
    }
    return undefined;
  }

  /** Reachability (the service's /healthz); its own dependencies are its own readiness. */
  async healthy(): Promise<void> {
    const res = await this.pool.request({ method: 'GET', path: '/healthz', signal: AbortSignal.timeout(1000) });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.close(), this.pages.close()]);
  }
}
