import { create } from '@bufbuild/protobuf';
import { fromGrpcError, type TypedClient } from '@fcd/grpc';
import { type BillingService, ListStatementsRequestSchema, type Statement } from '@fcd/proto';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { requireAccount } from '../auth/account';
import { NoQuery } from './usage-schema';

const ACCOUNT_STATEMENTS_PATH = '/v1/account/statements';

const Usd = (description: string) => Type.String({ pattern: '^-?[0-9]+\\.[0-9]{3,6}$', description });

/** GET /v1/account/statements → the account's closed monthly statements, newest first (docs/api.md, "Statements"). */
export const StatementsResponse = Type.Object({
  data: Type.Array(
    Type.Object({
      period: Type.String({ pattern: '^[0-9]{4}-[0-9]{2}$', description: 'The UTC month billed, YYYY-MM.' }),
      tiers: Type.Array(
        Type.Object({
          tier: Type.String(),
          days: Type.Integer({ description: 'Days of the period billed in this tier (the tier in force at the end of each day).' }),
          daily_limit: Type.Integer(),
          included_requests: Type.Integer({ description: 'days × daily_limit.' }),
          overage_requests: Type.Integer(),
          overage_rate_usd: Usd('USD per request over the daily limit.'),
          amount_usd: Usd('overage_requests × overage_rate_usd, exact.'),
        }),
      ),
      total_requests: Type.Integer(),
      included_requests: Type.Integer(),
      overage_requests: Type.Integer(),
      overage_rate_usd: Usd('The rate of the tier in force at the end of the period.'),
      amount_usd: Usd('The sum of the tiers’ amounts, exact (a decimal string, never a float).'),
      closed_at: Type.String({ format: 'date-time' }),
      adjustments: Type.Array(
        Type.Object({
          total_requests: Type.Integer(),
          included_requests: Type.Integer(),
          overage_requests: Type.Integer(),
          amount_usd: Usd('The correction: added to the statement’s amount.'),
          created_at: Type.String({ format: 'date-time' }),
        }),
        { description: 'Late corrections, oldest first: differences added to the statement, which never changes.' },
      ),
    }),
  ),
});

function view(s: Statement): Static<typeof StatementsResponse>['data'][number] {
  return {
    period: s.period,
    tiers: s.tiers.map((t) => ({
      tier: t.tier,
      days: t.days,
      daily_limit: Number(t.dailyLimit),
      included_requests: Number(t.includedRequests),
      overage_requests: Number(t.overageRequests),
      overage_rate_usd: t.overageRateUsd,
      amount_usd: t.amountUsd,
    })),
    total_requests: Number(s.totalRequests),
    included_requests: Number(s.includedRequests),
    overage_requests: Number(s.overageRequests),
    overage_rate_usd: s.overageRateUsd,
    amount_usd: s.amountUsd,
    closed_at: s.closedAt,
    adjustments: s.adjustments.map((a) => ({
      total_requests: Number(a.totalRequests),
      included_requests: Number(a.includedRequests),
      overage_requests: Number(a.overageRequests),
      amount_usd: a.amountUsd,
      created_at: a.createdAt,
    })),
  };
}

/**
 * The account's own closed statements (every tier), answered by the usage service's BillingService
 * for the account the gateway authenticated: never another account's. Counted like any /v1 request.
 */
export function registerAccountStatementsRoute(app: FastifyInstance, deps: { billing: TypedClient<typeof BillingService> }): void {
  app.get(ACCOUNT_STATEMENTS_PATH, { schema: { querystring: NoQuery, response: { 200: StatementsResponse } } }, async (request) => {
    const { accountId } = requireAccount(request);
    try {
      const { statements } = await deps.billing.unary.listStatements(create(ListStatementsRequestSchema, { accountId }));
      return { data: statements.map(view) };
    } catch (err) {
      throw fromGrpcError(err, 'usage');
    }
  });
}
