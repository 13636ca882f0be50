import { create } from '@bufbuild/protobuf';
import { type AuthorizeItem, type AuthorizeResult, AuthorizeResultSchema, Decision, GetUsageResponseSchema } from '@fcd/proto';
import type { Decision as MeterDecision, MeterResult, UsageMeter, UsageReport } from '../meter/index';

/** The meter's answers as gRPC messages. */

const DECISION: Record<MeterDecision, Decision> = {
  allowed: Decision.ALLOWED,
  unauthenticated: Decision.UNAUTHENTICATED,
  rate_limited: Decision.RATE_LIMITED,
  unavailable: Decision.UNAVAILABLE,
};

export function toUsage(report: UsageReport) {
  return create(GetUsageResponseSchema, {
    tier: report.tier,
    dailyLimit: report.dailyLimit,
    today: { requestCount: report.today.requestCount, remaining: report.today.remaining, resetsAt: report.today.resetsAt },
    billingPeriod: {
      start: report.billing.start,
      end: report.billing.end,
      totalRequests: BigInt(report.billing.totalRequests),
      includedRequests: BigInt(report.billing.includedRequests),
      overageRequests: BigInt(report.billing.overageRequests),
      overageRateUsd: report.billing.overageRateUsd,
      estimatedOverageUsd: report.billing.estimatedOverageUsd,
    },
    stale: report.stale,
  });
}

function toResult(r: MeterResult): AuthorizeResult {
  return create(AuthorizeResultSchema, {
    usage: r.usage ? toUsage(r.usage) : undefined,
    decision: DECISION[r.decision],
    accountId: r.principal?.accountId ?? '',
    tier: r.principal?.tier ?? '',
    tierRank: r.principal?.tierRank ?? 0,
    keyId: r.decision === 'allowed' ? (r.principal?.keyId ?? '') : '',
    sessionId: r.decision === 'allowed' ? (r.principal?.sessionId ?? '') : '',
    dailyLimit: r.principal?.dailyLimit ?? 0,
    count: r.count,
    remaining: r.remaining,
    resetsAt: r.resetsAt,
    retryAfterSeconds: r.retryAfterSeconds,
  });
}

/** `countBy`: the batch's deadline (Unix ms, 0 = none); items not counted by then are answered UNAVAILABLE. */
export async function decide(meter: UsageMeter, items: AuthorizeItem[], countBy: bigint): Promise<AuthorizeResult[]> {
  const results = await meter.authorize(
    items.map((i) => ({ apiKey: i.apiKey, includeUsage: i.includeUsage, peek: i.peek })),
    { countBy: Number(countBy) },
  );
  return results.map(toResult);
}

/** What a batch that could not be decided is answered: every item UNAVAILABLE, retry in a second. */
export const unavailableResults = (items: AuthorizeItem[]) =>
  items.map(() => create(AuthorizeResultSchema, { decision: Decision.UNAVAILABLE, retryAfterSeconds: 1 }));
