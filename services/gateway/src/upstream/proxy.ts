import { AppError, serviceUnavailable } from '@fcd/service-kit';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Pool } from 'undici';

const PASS_HEADERS = ['content-type', 'location', 'retry-after', 'allow', 'link'];

/**
 * A domain service behind the gateway: a keep-alive connection pool, the
 * signed account header, and the body re-serialised from the parsed JSON.
 */
export class Upstream {
  private readonly pool: Pool;

  constructor(
    readonly name: string,
    readonly baseUrl: string,
    private readonly timeoutMs: number,
    connections: number,
  ) {
    this.pool = new Pool(baseUrl, {
      connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      connectTimeout: 5_000,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  async forward(request: FastifyRequest, reply: FastifyReply, accountHeader: string): Promise<FastifyReply> {
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
    let res: Awaited<ReturnType<Pool['request']>>;
    try {
      res = await this.pool.request({
        method: request.method as 'GET',
        path: request.url,
        headers,
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      request.log.warn({ upstream: this.name, err: { message: (err as Error).message } }, 'upstream unavailable');
      throw serviceUnavailable(this.name, 1, err);
    }
    let payload: Buffer;
    try {
      payload = Buffer.from(await res.body.arrayBuffer());
    } catch (err) {
      throw serviceUnavailable(this.name, 1, err);
    }
    if (res.statusCode === 401) {
      // The client's key was accepted here: a domain service refusing the signed account header is an
      // internal fault (secrets that differ, or a request queued past the header's few seconds), so the
      // client gets a retryable 503, never a 401 that would blame its key.
      request.log.error({ upstream: this.name }, 'upstream refused the signed account header');
      throw serviceUnavailable(this.name, 1);
    }
    if (res.statusCode >= 500 && res.statusCode !== 503) {
      request.log.error({ upstream: this.name, status: res.statusCode }, 'upstream error');
      throw new AppError('INTERNAL_ERROR', `An internal error occurred. Quote request id ${request.id} when reporting it.`);
    }
    for (const name of PASS_HEADERS) {
      const v = res.headers[name];
      if (typeof v === 'string') reply.header(name, v);
    }
    reply.code(res.statusCode);
    return res.statusCode === 204 || payload.length === 0 ? reply.send() : reply.send(payload);
  }

  /** Reachability (the service's /healthz); its own dependencies are its own readiness. */
  async healthy(): Promise<void> {
    const res = await this.pool.request({ method: 'GET', path: '/healthz', signal: AbortSignal.timeout(1000) });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
