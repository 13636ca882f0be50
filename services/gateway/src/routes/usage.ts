import { create } from '@bufbuild/protobuf';
import { fromGrpcError, type TypedClient } from '@fcd/grpc';
import { GetUsageRequestSchema, type GetUsageResponse, type UsageService } from '@fcd/proto';
import { serviceUnavailable } from '@fcd/service-kit';
import type { FastifyInstance } from 'fastify';
import { requireAccount } from '../auth/account';
import type { AuthorizationBatcher } from '../auth/batcher';
import { countNow, USAGE_PATH } from '../auth/metering';
import { ifNoneMatchMatches, strongEtag } from '../http/conditional';
import { registerAccountHistoryRoutes } from './account-history';
import { type AccountKeyDeps, registerAccountKeyRoutes } from './account-keys';
import { NoQuery, UsageResponseSchema } from './usage-schema';

/** The public usage report (docs/metering.md "Usage report"), or undefined when the usage service's answer lacks a part. */
function usageBody(u: GetUsageResponse) {
  const { today, billingPeriod: b } = u;
  if (!today || !b) return undefined;
  return {
    data: {
      tier: u.tier,
      daily_limit: u.dailyLimit,
      today: { request_count: today.requestCount, remaining: today.remaining, resets_at: today.resetsAt },
      billing_period: {
        start: b.start,
        end: b.end,
        total_requests: Number(b.totalRequests),
        included_requests: Number(b.includedRequests),
        overage_requests: Number(b.overageRequests),
        overage_rate_usd: b.overageRateUsd,
        estimated_overage_usd: b.estimatedOverageUsd,
      },
    },
  };
}

/**
 * The /v1/account routes, answered with the usage service: GET /v1/account/usage (the report
 * computed with the authorization, else asked of the usage service), the account's own API keys
 * (routes/account-keys.ts), its usage per day and its audit log (routes/account-history.ts).
 */
export function registerUsageRoute(
  app: FastifyInstance,
  deps: AccountKeyDeps & { batcher: AuthorizationBatcher; usage: TypedClient<typeof UsageService> },
): void {
  registerAccountKeyRoutes(app, deps);
  registerAccountHistoryRoutes(app, deps);
  app.get(USAGE_PATH, { schema: { querystring: NoQuery, response: { 200: UsageResponseSchema } } }, async (request, reply) => {
    const account = requireAccount(request);
    let u = request.usageReport;
    if (request.uncounted && u) {
      // A conditional GET of the report is peeked, so the report shows today's count without this
      // request. Unchanged since the client's copy → 304 (the onSend hook), uncounted; changed →
      // counted now, and the report includes this request like any other.
      const peeked = usageBody(u);
      if (peeked && ifNoneMatchMatches(request.headers['if-none-match'], strongEtag(reply.serialize(peeked) as string))) return peeked;
      u = (await countNow(deps.batcher, request, reply, true)).usage;
    }
    if (!u) {
      try {
        u = await deps.usage.unary.getUsage(create(GetUsageRequestSchema, { accountId: account.accountId }));
      } catch (err) {
        throw fromGrpcError(err, 'usage');
      }
    }
    const body = usageBody(u);
    if (!body) {
      // Today and the billing period are always set by the usage service; a report without them is a
      // broken dependency, never a 200 with made-up zeros (the client could take them for its bill).
      request.log.error({ has_today: Boolean(u.today), has_billing_period: Boolean(u.billingPeriod) }, 'usage report incomplete');
      throw serviceUnavailable('usage');
    }
    // Earlier days from the usage service's cache while its store is unreachable (docs/metering.md).
    if (u.stale) reply.header('x-usage-stale', 'true');
    return body;
  });
}
