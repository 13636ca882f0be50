import { performance } from 'node:perf_hooks';
import { parseWebhookUrl, type Resolver, safeLookup } from '@fcd/webhooks';
import { Agent, request } from 'undici';

/**
 * One HTTP POST per attempt over an undici keep-alive pool. Connect timeout
 * and a total timeout (response headers and body), no redirects (a 3xx is a
 * failure), the response body read up to a small cap and dropped, and the
 * destination checked twice: the URL before the attempt, and every resolved
 * address at connect time (`safeLookup`, DNS rebinding).
 */

export type FailureKind = 'http_status' | 'timeout' | 'connect_timeout' | 'blocked' | 'dns' | 'tls' | 'connection' | 'invalid_url';

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
}

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
  /** node:dns unless injected (tests). */
  resolver?: Resolver;
  /** Extra TLS options for the connector (tests pass a CA; processes use NODE_EXTRA_CA_CERTS). */
  tls?: { ca?: string | Buffer };
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

  constructor(private readonly options: SenderOptions) {
    this.maxResponseBytes = options.maxResponseBytes ?? 4096;
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 120_000,
      connections: options.connectionsPerOrigin ?? 32,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: {
        timeout: options.connectTimeoutMs,
        lookup: safeLookup({ allowPrivate: options.allowPrivate, resolver: options.resolver }) as never,
        ...(options.tls ?? {}),
      },
    });
  }

  async send(url: string, body: string, headers: Record<string, string>): Promise<SendResult> {
    const started = performance.now();
    const done = (r: Omit<SendResult, 'durationMs' | 'retryAfterMs' | 'permanent'> & { retryAfterMs?: number | null }): SendResult => ({
      retryAfterMs: null,
      ...r,
      permanent: r.kind === 'blocked' || r.kind === 'invalid_url',
      durationMs: performance.now() - started,
    });
    const parsed = parseWebhookUrl(url, this.options.allowPrivate);
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
        dispatcher: this.agent,
        signal: controller.signal,
      });
      let read = 0;
      for await (const chunk of res.body) {
        read += (chunk as Buffer).length;
        if (read > this.maxResponseBytes) {
          res.body.destroy();
          break;
        }
      }
      const success = res.statusCode >= 200 && res.statusCode < 300;
      const throttled = res.statusCode === 429 || res.statusCode === 503;
      return done({
        status: res.statusCode,
        success,
        kind: success ? null : 'http_status',
        error: success ? null : `HTTP ${res.statusCode}`,
        retryAfterMs: throttled ? parseRetryAfter(res.headers['retry-after'], Date.now()) : null,
      });
    } catch (err) {
      return done({ status: null, success: false, ...classify(err, timedOut) });
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
