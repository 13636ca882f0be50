import { create } from '@bufbuild/protobuf';
import { addService, grpc } from '@fcd/grpc';
import { BillingService, ListStatementsResponseSchema } from '@fcd/proto';
import { AppError, type ServiceMetrics } from '@fcd/service-kit';
import type { StatementStore } from '../store/statements';

/**
 * BillingService on the usage gRPC server (proto/usage/v1/billing.proto): the statements of the one
 * account the caller names (the gateway names the account it authenticated).
 */
export function addBillingService(server: grpc.Server, statements: StatementStore, metrics: ServiceMetrics): void {
  addService(
    server,
    BillingService,
    {
      async listStatements(request) {
        if (!request.accountId) throw new AppError('VALIDATION_ERROR', 'account_id is required.');
        const list = await statements.list({ accountId: request.accountId });
        return create(ListStatementsResponseSchema, {
          statements: list.map((s) => ({
            accountId: s.accountId,
            period: s.period,
            tiers: s.tiers.map((t) => ({
              tier: t.tier,
              days: t.days,
              dailyLimit: BigInt(t.dailyLimit),
              includedRequests: BigInt(t.includedRequests),
              overageRequests: BigInt(t.overageRequests),
              overageRateUsd: t.overageRateUsd,
              amountUsd: t.amountUsd,
            })),
            totalRequests: BigInt(s.totalRequests),
            includedRequests: BigInt(s.includedRequests),
            overageRequests: BigInt(s.overageRequests),
            overageRateUsd: s.overageRateUsd,
            amountUsd: s.amountUsd,
            closedAt: s.closedAt,
            adjustments: s.adjustments.map((a) => ({
              totalRequests: BigInt(a.totalRequests),
              includedRequests: BigInt(a.includedRequests),
              overageRequests: BigInt(a.overageRequests),
              amountUsd: a.amountUsd,
              createdAt: a.createdAt,
            })),
          })),
        });
      },
    },
    {
      onUnary: (method, code, seconds) => {
        const labels = { route: method, method: 'grpc', status: grpc.status[code] ?? String(code) };
        metrics.requestDuration.observe(labels, seconds);
        metrics.requestsTotal.inc(labels);
      },
    },
  );
}
