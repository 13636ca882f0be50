import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { Timestamp } from '../domain/fields';
import { latestSources } from '../echo/sources';
import type { Queryable } from '../store/queries';
import { dataOf, NoQuery } from './schemas';

/**
 * GET /v1/sources: the freshness of the data. Each ECHO file the syncs applied, with its own date
 * (the zip entry's), when it was synced and its rows (docs/echo.md "Freshness", docs/api.md).
 */
const SourceSchema = Type.Object({
  name: Type.String({ description: 'The ECHO file, as EPA names it, e.g. `ECHO_EXPORTER.csv`.' }),
  archive: Type.Union([Type.String(), Type.Null()], {
    description: 'The zip it was read from, e.g. `echo_exporter.zip`; null when it was read as a plain CSV file.',
  }),
  file_date: Type.Union([Timestamp, Type.Null()], {
    description:
      "The file's own date: the zip entry's modification time (a plain CSV file's modification time). A zip entry without an extended (UTC) timestamp has an MS-DOS time, which has no zone and is read as UTC, to 2 seconds.",
  }),
  synced_at: Type.String({
    format: 'date-time',
    description:
      "When the last sync that applied this file applied it (the time of the transaction that wrote its rows). A facility's `data_as_of` is the `synced_at` of the `ECHO_EXPORTER.csv` (or `FRS_FACILITIES.csv`) sync that last wrote it.",
  }),
  rows: Type.Integer({ minimum: 0, description: 'Data rows read from the file (the header not counted).' }),
  rejected_rows: Type.Integer({ minimum: 0, description: 'Rows of those that were rejected (reported by the sync, not stored).' }),
});

const SourcesResponseSchema = dataOf(Type.Array(SourceSchema));

export interface SourcesRoutesOptions {
  db: Queryable;
}

export async function sourcesRoutes(app: FastifyInstance, { db }: SourcesRoutesOptions): Promise<void> {
  app.get('/v1/sources', { schema: { querystring: NoQuery, response: { 200: SourcesResponseSchema } } }, async () => ({
    data: await latestSources(db),
  }));
}
