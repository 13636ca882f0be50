import type { Clock } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PeriodBounds } from '../domain/proration';
import type { StatementStore } from '../store/statements';
import { type AccountOutcome, closePeriod, requirePeriod } from './close';
import { CONTENT_TYPES, renderStatements, STATEMENT_FORMATS, type StatementFormat } from './export';
import type { BillingMetrics } from './metrics';

export interface BillingHttpDeps {
  statements: StatementStore;
  clock: Clock;
  metrics: BillingMetrics;
  /** This replica's unflushed counts, then the period's live Redis counters, into Postgres (billing/land.ts). */
  landCounts(bounds: PeriodBounds): Promise<number>;
}

/** Counts what a close run in this process wrote (the statements' own figures stay exact). */
function countOutcome(metrics: BillingMetrics, o: AccountOutcome): void {
  metrics.statements.inc({ outcome: o.outcome });
  if (o.amountMicroUsd > 0n) metrics.amountUsd.inc(Number(o.amountMicroUsd) / 1e6);
}

/**
 * The format of a statements list: `format=` when given, else the Accept header (text/csv → csv,
 * application/x-ndjson or application/jsonl → jsonl), else JSON.
 */
function formatOf(request: FastifyRequest, format: StatementFormat | undefined): StatementFormat {
  if (format) return format;
  const accept = request.headers.accept ?? '';
  if (/\btext\/csv\b/.test(accept)) return 'csv';
  if (/\bapplication\/(x-ndjson|jsonl)\b/.test(accept)) return 'jsonl';
  return 'json';
}

/** Billing close and statements on the admin API (docs/metering.md, "Billing close"). */
export function registerBillingRoutes(admin: FastifyInstance, deps: BillingHttpDeps): void {
  admin.post(
    '/admin/v1/billing/close',
    { schema: { body: Type.Object({ period: Type.String() }, { additionalProperties: false }) } },
    async (request) => {
      const { period } = request.body as { period: string };
      const result = await closePeriod(
        { statements: deps.statements, clock: deps.clock, landCounts: deps.landCounts, onAccount: (o) => countOutcome(deps.metrics, o) },
        period,
      );
      return { data: result };
    },
  );
  admin.get(
    '/admin/v1/statements',
    {
      schema: {
        querystring: Type.Object(
          { period: Type.String(), format: Type.Optional(Type.Union(STATEMENT_FORMATS.map((f) => Type.Literal(f)))) },
          { additionalProperties: false },
        ),
      },
    },
    async (request, reply) => {
      const query = request.query as { period: string; format?: StatementFormat };
      const bounds = requirePeriod(query.period);
      const format = formatOf(request, query.format);
      const list = await deps.statements.list({ period: bounds.period });
      return reply.type(CONTENT_TYPES[format]).send(renderStatements(list, format));
    },
  );
}
