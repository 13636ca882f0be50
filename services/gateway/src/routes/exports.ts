import { Readable } from 'node:stream';
import { Decision } from '@fcd/proto';
import { AppError, type InternalAuth, UNAUTHORIZED_MESSAGE, validationError } from '@fcd/service-kit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthorizationBatcher } from '../auth/batcher';
import { sendAnswer, type Upstream, type UpstreamPage } from '../clients/proxy';
import { EXPORT_KINDS, EXPORT_PAGE_ROWS } from './table';

/**
 * GET /v1/exports/{facilities,violations,cases} (Pro and above; docs/api.md, "Bulk export";
 * docs/metering.md, "Exports"; ADR 0005).
 *
 * The gateway walks the facility service's export pages of 1,000 rows (keyset on id) and streams
 * them as they come: memory is one page. The request's own authorization counts the first page;
 * every further page is counted with an ordinary authorization item *before* it is written, so an
 * export of N rows is counted exactly ⌈N / 1000⌉ times (at least once) and a page that could not
 * be counted is never sent. When a page cannot be fetched or counted the export stops: NDJSON ends
 * with a line `{"export":{"complete":false,"rows":…,"after":"<id>","error":…}}`; CSV, which has no
 * place for it, is cut (no terminating chunk). Either way `after=<id of the last row received>`
 * resumes with no gap and no duplicate. A complete NDJSON export ends with
 * `{"export":{"complete":true,"rows":…,"after":null}}`.
 */
const RESERVED = ['page_size', 'format', 'header'];

export interface ExportDeps {
  facility: Upstream;
  internalAuth: InternalAuth;
  batcher: AuthorizationBatcher;
}

function wantsCsv(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return /(^|,)\s*text\/csv\s*(;|,|$)/i.test(accept);
}

export function registerExports(app: FastifyInstance, deps: ExportDeps): void {
  for (const kind of EXPORT_KINDS) {
    const publicPath = `/v1/exports/${kind}`;
    app.get(publicPath, async (request, reply) => {
      const account = request.account;
      const apiKey = request.meterKey;
      if (!account || !apiKey) throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
      const key: string = apiKey;
      const query = new URLSearchParams(request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '');
      const reserved = RESERVED.filter((name) => query.has(name));
      if (reserved.length > 0) throw validationError(reserved.map((field) => ({ field, message: 'is not a parameter of this endpoint' })));
      const csv = wantsCsv(request);
      query.set('page_size', String(EXPORT_PAGE_ROWS));
      query.set('format', csv ? 'csv' : 'ndjson');

      const fetchPage = (after: string | undefined, header: boolean): Promise<UpstreamPage> => {
        const q = new URLSearchParams(query);
        if (after !== undefined) q.set('after', after);
        if (header) q.set('header', 'true');
        const path = `/internal/v1/exports/${kind}?${q}`;
        const signed = deps.internalAuth.sign(
          { account_id: account.accountId, tier: account.tier, tier_rank: account.tierRank, request_id: request.id },
          { audience: deps.facility.name, method: 'GET', path },
        );
        return deps.facility.getInternal(path, signed, request.id);
      };

      // The first page answers for the request: a bad filter or cursor is its 400, an outage its 503.
      const first = await fetchPage(query.get('after') ?? undefined, csv);
      if (first.status !== 200)
        return sendAnswer(reply, { status: first.status, headers: first.headers, body: Buffer.concat(first.chunks) });
      reply.header('content-type', csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson');
      reply.header('cache-control', 'private, no-store');
      if (request.method === 'HEAD') return reply.send();

      const log = request.log;
      async function* pages(): AsyncGenerator<Buffer | string> {
        let page = first;
        let rows = Number(page.headers['x-export-rows'] ?? 0);
        // Taken out of the page as they are handed on, so no page's rows outlive their writing (the
        // first page would otherwise stay referenced, by `first`, for the whole export).
        yield* page.chunks.splice(0);
        const stop = (after: string | undefined, error: AppError): string => {
          log.warn({ kind, rows, code: error.code }, 'export stopped before its end');
          // CSV has no place for the reason: the response is cut, and the client resumes from its last row.
          if (csv) throw error;
          return `${JSON.stringify({ export: { complete: false, rows, after: after ?? null, error: { code: error.code, message: error.message } } })}\n`;
        };
        while (page.headers['x-export-more'] === 'true') {
          const after = page.headers['x-export-last'];
          let next: UpstreamPage;
          try {
            next = await fetchPage(after, false);
          } catch (err) {
            yield stop(after, err instanceof AppError ? err : new AppError('SERVICE_UNAVAILABLE', 'The facility service is unavailable.'));
            return;
          }
          if (next.status !== 200) {
            yield stop(after, new AppError('SERVICE_UNAVAILABLE', 'The facility service is unavailable. Resume with `after`.'));
            return;
          }
          // Counted before it is written: a page that cannot be counted is not sent.
          const counted = await deps.batcher.authorize(key, 'GET', publicPath);
          if (counted.decision !== Decision.ALLOWED) {
            const error =
              counted.decision === Decision.RATE_LIMITED
                ? new AppError('RATE_LIMIT_EXCEEDED', `Daily request limit of ${counted.dailyLimit} requests exceeded.`)
                : new AppError('SERVICE_UNAVAILABLE', 'Metering is unavailable. Resume with `after`.');
            yield stop(after, error);
            return;
          }
          rows += Number(next.headers['x-export-rows'] ?? 0);
          page = next;
          yield* page.chunks.splice(0);
        }
        if (!csv) yield `${JSON.stringify({ export: { complete: true, rows, after: null } })}\n`;
      }
      return reply.send(Readable.from(pages(), { objectMode: false }));
    });
  }
}
