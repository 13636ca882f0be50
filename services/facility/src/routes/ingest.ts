import { validationError } from '@fcd/service-kit';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { RecordKind } from '../domain/records';
import { rowsOf } from '../domain/row-source';
import { mapDbError } from '../store/db';
import type { Ingestion, RawRow } from '../store/ingestion';
import { IngestJsonBody, IngestQuery, IngestResponse } from './schemas';

export interface IngestRoutesOptions {
  ingestion: Ingestion;
  bodyLimit: number;
}

const TEXT_TYPES: Record<string, 'ndjson' | 'csv'> = {
  'application/x-ndjson': 'ndjson',
  'application/ndjson': 'ndjson',
  'application/jsonl': 'ndjson',
  'text/csv': 'csv',
};

/**
 * POST /internal/v1/ingest (bearer token; not routed by the gateway).
 * - application/json `{ facilities?: [...], violations?: [...], cases?: [...] }`:
 *   one transaction, facilities first, then violations, then cases; errors name
 *   the row by its 0-based `index` in its array.
 * - application/x-ndjson or text/csv with `?kind=facilities|violations|cases`:
 *   the import file format; errors name the row by `line`.
 * 200 with per-kind counts, event counts and row errors (good rows land).
 */
export async function ingestRoutes(app: FastifyInstance, opts: IngestRoutesOptions): Promise<void> {
  app.addContentTypeParser(Object.keys(TEXT_TYPES), { parseAs: 'string', bodyLimit: opts.bodyLimit }, (_req, body, done) => {
    done(null, body);
  });

  app.post<{ Body: Static<typeof IngestJsonBody> | string; Querystring: Static<typeof IngestQuery> }>(
    '/internal/v1/ingest',
    { bodyLimit: opts.bodyLimit, schema: { querystring: IngestQuery, response: { 200: IngestResponse } } },
    async (request) => {
      try {
        if (typeof request.body === 'string') {
          const mime = (request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
          const format = TEXT_TYPES[mime] ?? 'ndjson';
          const kind = request.query.kind;
          if (!kind) throw validationError([{ field: 'kind', message: 'is required for NDJSON and CSV bodies' }]);
          return { data: await opts.ingestion.ingestStream(kind, rowsOf(format, request.body, kind)) };
        }
        const body = request.body as Record<string, unknown>;
        const problems = checkJsonBody(body);
        if (problems.length > 0) throw validationError(problems);
        const input: { [K in RecordKind]?: RawRow[] } = {};
        for (const kind of ['facilities', 'violations', 'cases'] as const) {
          const rows = body[kind] as Array<Record<string, unknown>> | undefined;
          if (rows) input[kind] = rows.map((raw, index) => ({ ref: { index }, raw }));
        }
        return { data: await opts.ingestion.ingestAll(input) };
      } catch (err) {
        return mapDbError(err);
      }
    },
  );
}

/** The JSON body is checked here (not by the route schema) so the text formats can share the route. */
function checkJsonBody(body: Record<string, unknown>) {
  const problems: { field: string; message: string }[] = [];
  for (const key of Object.keys(body)) {
    if (!(key in IngestJsonBody.properties)) {
      problems.push({ field: key, message: 'is not a known field' });
      continue;
    }
    const rows = body[key];
    if (!Array.isArray(rows)) {
      problems.push({ field: key, message: 'must be an array of objects' });
      continue;
    }
    rows.forEach((r, i) => {
      if (r === null || typeof r !== 'object' || Array.isArray(r)) problems.push({ field: `${key}[${i}]`, message: 'must be an object' });
    });
  }
  return problems;
}
