import { performance } from 'node:perf_hooks';
import { parseWebhookUrl, type Resolver, safeLookup } from '@fcd/webhooks';
import { Agent, request } from 'undici';
import { type AttemptTimings, NO_TIMINGS, type TimingProbe, timedConnector, timingInterceptor, timingsOf } from './timing';

/**
 * One HTTP POST per attempt over an undici keep-alive pool. Connect timeout
 * and a total timeout (response headers and body), no redirects (a 3xx is a
 * failure), and the destination checked twice: the URL before the attempt, and
 * every resolved address at connect time (`safeLookup`, DNS rebinding).
 *
 * For the delivery log, each result carries what the owner needs to debug the
 * receiver (docs/webhooks.md): the headers sent, the response headers (at most
 * MAX_RESPONSE_HEADER_BYTES of them), the first `maxResponseBytes` (4 KiB) of
 * the response body with a truncation flag (the rest is not read), and the
 * phase timings (./timing.ts).
 */

/** Response headers kept for the log: name and value bytes together, in the order received. */
const MAX_RESPONSE_HEADER_BYTES = 8192;
/** The response body kept for the log (and read at most, plus one byte to know it was cut). */
const MAX_RESPONSE_BODY_BYTES = 4096;

type FailureKind =
  | 'http_status'
  | 'timeout'
  | 'connect_timeout'
  | 'blocked'
  | 'dns'
  | 'tls'
  | 'connection'
  | 'invalid_url'
  /** Not sent: `mayStart` said no when the request was about to be written (nothing reached the receiver). */
  | 'late_start';

/** Thrown by the start gate: the request is not written; its connection stays in the pool. */
class LateStartError extends Error {
  readonly code = 'FCD_LATE_START';
}

function gateOrThrow(mayStart: () => boolean): void {
  if (!mayStart()) throw new LateStartError('start gate closed');
}

export interface SendResult {
  status: number | null;
  success: boolean;
  /** Short, secret-free description of a failure. */
  error: string | null;
  kind: FailureKind | null;
  durationMs: number;
  /** A 429 or 503's Retry-After in ms (seconds or an HTTP date); null when absent or unreadable. */
  retryAfterMs: number | null;
  /** The destination is refused for good (URL or resolved address fails the safety rules): no retry. */
  permanent: boolean;
  /** The headers the dispatcher set on the request (signatures included; not the transport's host, connection, content-length). */
  requestHeaders: Record<string, string>;
  /** The response headers (lower-case names, repeated ones joined with ", "), bounded; null without a response. */
  responseHeaders: Record<string, string> | null;
  /** Some response headers were left out (over MAX_RESPONSE_HEADER_BYTES). */
  responseHeadersTruncated: boolean;
  /** The first 4 KiB of the response body as UTF-8 (invalid bytes and NUL replaced by U+FFFD); null without a response. */
  responseBody: string | null;
  /** The body was longer than what is kept. */
  responseBodyTruncated: boolean;
  timings: AttemptTimings;
}

/** Response headers as the log keeps them: lower-case names, at most `maxBytes` of names and values, in order. */
export function boundHeaders(
  headers: Record<string, string | string[] | undefined>,
  maxBytes = MAX_RESPONSE_HEADER_BYTES,
): { headers: Record<string, string>; truncated: boolean } {
  const out: Record<string, string> = {};
  let used = 0;
  let truncated = false;
  for (const [name, raw] of Object.entries(headers)) {
    if (raw === undefined) continue;
    const value = Array.isArray(raw) ? raw.join(', ') : raw;
    const size = Buffer.byteLength(name) + Buffer.byteLength(value);
    if (used + size > maxBytes) {
      truncated = true;
      continue;
    }
    used += size;
    out[name.toLowerCase()] = value;
  }
  return { headers: out, truncated };
}

const UTF8 = new TextDecoder('utf-8', { fatal: false });

/** Bytes of a response body → text for the log: UTF-8 with replacement characters; NUL (which Postgres text refuses) replaced too. */
function bodyText(bytes: Buffer): string {
  return UTF8.decode(bytes).replaceAll('\u0000', '\uFFFD');
}

/** URLs whose check is kept (a few per subscription); past this the cache starts over. */
const URL_CACHE_SIZE = 10_000;

/** Retry-After as ms from now: delay-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return null;
  if (/^\d{1,9}$/.test(text)) return Number(text) * 1000;
  // An HTTP date names its weekday or month; plain numbers like "-1" or "1.5" are not dates.
  const at = /[A-Za-z]{3}/.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

export interface SenderOptions {
  connectTimeoutMs: number;
  timeoutMs: number;
  allowPrivate: boolean;
  /** WEBHOOK_ALLOWED_PORTS: a URL on another port is refused (permanently) rather than left to time out at the egress policy. */
  allowedPorts?: readonly number[];
  /** node:dns unless injected (tests). */
  resolver?: Resolver;
  /** Extra TLS options for the connector (tests pass a CA; processes use NODE_EXTRA_CA_CERTS). */
  tls?: { ca?: string | Buffer };
  /** Response body bytes kept for the log (default 4 KiB). */
  maxResponseBytes?: number;
  /** Connections per origin. */
  connectionsPerOrigin?: number;
}

const TLS_CODES = new Set([
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'ENODATA', 'ETIMEOUT', 'EAI_NONAME']);

function classify(err: unknown, timedOut: boolean): { kind: FailureKind; error: string } {
  const e = err as (Error & { code?: string; cause?: { code?: string; message?: string } }) | undefined;
  const code = e?.code ?? e?.cause?.code ?? '';
  if (timedOut || e?.name === 'TimeoutError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return { kind: 'timeout', error: 'timed out waiting for the response' };
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return { kind: 'connect_timeout', error: 'timed out connecting' };
  if (code === 'EBLOCKED') return { kind: 'blocked', error: `blocked: ${e?.message ?? 'address not allowed'}` };
  if (DNS_CODES.has(code)) return { kind: 'dns', error: `dns: ${code}` };
  if (TLS_CODES.has(code) || /certificate|tls|ssl/i.test(e?.message ?? '')) return { kind: 'tls', error: `tls: ${code || e?.message}` };
  return { kind: 'connection', error: `connection: ${code || e?.message || 'failed'}`.slice(0, 200) };
}

export class Sender {
  private readonly agent: Agent;
  private readonly maxResponseBytes: number;
  /** parseWebhookUrl's verdict per URL: it depends on the URL and this sender's options only. */
  private readonly urls = new Map<string, ReturnType<typeof parseWebhookUrl>>();

  constructor(private readonly options: SenderOptions) {
    this.maxResponseBytes = options.maxResponseBytes ?? MAX_RESPONSE_BODY_BYTES;
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 120_000,
      connections: options.connectionsPerOrigin ?? 32,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      // undici's connector with the same options, timing each connection's DNS, connect and TLS steps.
      connect: timedConnector({
        timeout: options.connectTimeoutMs,
        lookup: safeLookup({ allowPrivate: options.allowPrivate, resolver: options.resolver }) as never,
        ...(options.tls ?? {}),
      }),
    });
  }

  /**
   * `mayStart`, when given, is asked once the connection is ready, just before the request is
   * written: false → not sent (kind `late_start`), so a slow new connection (TCP and TLS under
   * load) counts towards a rate-limited delivery's start bound.
   */
  async send(url: string, body: string, headers: Record<string, string>, mayStart?: () => boolean): Promise<SendResult> {
    const started = performance.now();
    const probe: TimingProbe = {};
    const done = (
      r: Pick<SendResult, 'status' | 'success' | 'error' | 'kind'> &
        Partial<
          Pick<SendResult, 'retryAfterMs' | 'responseHeaders' | 'responseHeadersTruncated' | 'responseBody' | 'responseBodyTruncated'>
        >,
    ): SendResult => ({
      retryAfterMs: null,
      responseHeaders: null,
      responseHeadersTruncated: false,
      responseBody: null,
      responseBodyTruncated: false,
      ...r,
      permanent: r.kind === 'blocked' || r.kind === 'invalid_url',
      durationMs: performance.now() - started,
      requestHeaders: { ...headers },
      timings: r.kind === 'invalid_url' ? NO_TIMINGS : timingsOf(probe),
    });
    const parsed = this.checkUrl(url);
    if (!parsed.ok) return done({ status: null, success: false, kind: 'invalid_url', error: `url refused: ${parsed.message}` });

    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.options.timeoutMs);
    try {
      const res = await request(parsed.url, {
        method: 'POST',
        body,
        headers,
        // Asked in undici's onRequestStart (connection up, nothing written yet): throwing there fails
        // the request unwritten and leaves the socket in the pool for the next request.
        dispatcher: this.agent.compose(timingInterceptor(probe, mayStart && (() => gateOrThrow(mayStart)))),
        signal: controller.signal,
      });
      // The first maxResponseBytes are kept; one byte more says the body was cut, and the rest is not read.
      const chunks: Buffer[] = [];
      let read = 0;
      let truncated = false;
      for await (const chunk of res.body) {
        const buf = chunk as Buffer;
        const room = this.maxResponseBytes - read;
        if (buf.length > room) {
          if (room > 0) chunks.push(buf.subarray(0, room));
          read += Math.max(0, room);
          truncated = true;
          res.body.destroy();
          break;
        }
        chunks.push(buf);
        read += buf.length;
      }
      const bounded = boundHeaders(res.headers);
      const success = res.statusCode >= 200 && res.statusCode < 300;
      const throttled = res.statusCode === 429 || res.statusCode === 503;
      return done({
        status: res.statusCode,
        success,
        kind: success ? null : 'http_status',
        error: success ? null : `HTTP ${res.statusCode}`,
        retryAfterMs: throttled ? parseRetryAfter(res.headers['retry-after'], Date.now()) : null,
        responseHeaders: bounded.headers,
        responseHeadersTruncated: bounded.truncated,
        responseBody: bodyText(Buffer.concat(chunks)),
        responseBodyTruncated: truncated,
      });
    } catch (err) {
      if (err instanceof LateStartError)
        return done({ status: null, success: false, kind: 'late_start', error: 'not sent: started too late' });
      return done({ status: null, success: false, ...classify(err, timedOut) });
    } finally {
      clearTimeout(timer);
    }
  }

  private checkUrl(url: string): ReturnType<typeof parseWebhookUrl> {
    const cached = this.urls.get(url);
    if (cached) return cached;
    const parsed = parseWebhookUrl(url, this.options.allowPrivate, this.options.allowedPorts);
    if (this.urls.size >= URL_CACHE_SIZE) this.urls.clear();
    this.urls.set(url, parsed);
    return parsed;
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
