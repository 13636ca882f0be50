import { type GatewayAccounts, StringEnum } from '@fcd/service-kit';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance, preValidationAsyncHookHandler } from 'fastify';
import { CASE_STATUSES, CASE_TYPES, COMPLIANCE_STATUSES, PROGRAMS, SEVERITIES, STATE_CODES } from '../domain/codes';
import { CSV_COLUMNS, csvLine, csvRow, type ExportFilter, type ExportKind, exportPage } from '../store/exports';
import type { Queryable } from '../store/queries';
import { FACILITY_FILTER_PARAMS, facilityFilter, Since } from './facility-query';
import { rejectInvalid } from './validation';

/**
 * One page of a bulk export (GET /internal/v1/exports/{kind}), for the gateway, which walks the
 * pages and counts one request per page of 1,000 rows (docs/metering.md, "Exports"). Not routed
 * by the gateway as is: the public route is GET /v1/exports/{kind}. Gateway-signed header required,
 * with a tier of Pro and above (403 FORBIDDEN otherwise, as the gateway answers).
 *
 * Answer: the rows in the asked format (NDJSON: one representation per line; CSV: the rows, with the
 * header row first when `header=true`), `x-export-rows` (rows in this page), `x-export-last` (id of
 * the last row, the next page's `after`) and `x-export-more` (`true` when rows follow).
 */
const Uuid = Type.String({ format: 'uuid' });
const Paging = {
  after: Type.String({ format: 'uuid', description: 'Resume after this row id (the id of the last row received).' }),
  page_size: Type.Integer({ minimum: 1, maximum: 1000 }),
  format: StringEnum(['ndjson', 'csv'] as const),
  header: Type.Boolean(),
};
const optionalObject = <P extends Record<string, import('@sinclair/typebox').TSchema>>(props: P) =>
  Type.Partial(Type.Object(props), { additionalProperties: false });

const ExportQuery = {
  facilities: optionalObject({
    state: StringEnum(STATE_CODES),
    program: StringEnum(PROGRAMS),
    compliance_status: StringEnum(COMPLIANCE_STATUSES),
    q: Type.String({ minLength: 1, maxLength: 200 }),
    ...FACILITY_FILTER_PARAMS,
    ...Paging,
  }),
  violations: optionalObject({
    state: StringEnum(STATE_CODES),
    facility_id: Uuid,
    program: StringEnum(PROGRAMS),
    severity: StringEnum(SEVERITIES),
    since: Since,
    ...Paging,
  }),
  cases: optionalObject({
    facility_id: Uuid,
    status: StringEnum(CASE_STATUSES),
    case_type: StringEnum(CASE_TYPES),
    since: Since,
    ...Paging,
  }),
};

/** The public query of GET /v1/exports/{kind} (the gateway adds the paging parameters). */
export const ExportPublicQuery = {
  facilities: Type.Omit(ExportQuery.facilities, ['page_size', 'format', 'header'], { additionalProperties: false }),
  violations: Type.Omit(ExportQuery.violations, ['page_size', 'format', 'header'], { additionalProperties: false }),
  cases: Type.Omit(ExportQuery.cases, ['page_size', 'format', 'header'], { additionalProperties: false }),
};

const normalizeCodes: preValidationAsyncHookHandler = async (request) => {
  const q = request.query as Record<string, unknown>;
  if (typeof q.state === 'string') q.state = q.state.trim().toUpperCase();
  if (typeof q.program === 'string') q.program = q.program.trim().toUpperCase();
};

export async function exportRoutes(app: FastifyInstance, opts: { db: Queryable; accounts: GatewayAccounts }): Promise<void> {
  app.addHook('onRoute', (route) => {
    route.attachValidation = true;
  });
  // Pro and above, checked here too: the gateway's tier gate is not the only wall.
  app.addHook('onRequest', opts.accounts.requirePro('Bulk exports'));
  app.addHook('preHandler', rejectInvalid);
  for (const kind of ['facilities', 'violations', 'cases'] as const satisfies ExportKind[]) {
    app.get<{
      Querystring: Static<(typeof ExportQuery)['facilities']> &
        Static<(typeof ExportQuery)['violations']> &
        Static<(typeof ExportQuery)['cases']>;
    }>(
      `/internal/v1/exports/${kind}`,
      { preValidation: normalizeCodes, schema: { querystring: ExportQuery[kind] } },
      async (request, reply) => {
        const { after, page_size, format, header, ...filter } = request.query;
        if (filter.facility_id) filter.facility_id = filter.facility_id.toLowerCase();
        // The facility list's filters, checked and shaped as the list takes them (bbox parsed).
        const given = kind === 'facilities' ? facilityFilter(filter) : filter;
        const page = await exportPage(opts.db, kind, given as ExportFilter, after?.toLowerCase(), page_size ?? 1000);
        const last = page.rows[page.rows.length - 1];
        reply.header('x-export-rows', String(page.rows.length));
        reply.header('x-export-more', String(page.more));
        if (last) reply.header('x-export-last', last.id);
        if (format === 'csv') {
          reply.type('text/csv; charset=utf-8');
          return (header ? csvLine(CSV_COLUMNS[kind]) : '') + page.rows.map((r) => csvRow(kind, r)).join('');
        }
        reply.type('application/x-ndjson');
        return page.rows.map((r) => `${JSON.stringify(r)}\n`).join('');
      },
    );
  }
}
