import { create } from '@bufbuild/protobuf';
import {
  ActorType,
  type GetDailyUsageRequest,
  type GetDailyUsageResponse,
  GetDailyUsageResponseSchema,
  type ListAuditLogRequest,
  type ListAuditLogResponse,
  ListAuditLogResponseSchema,
} from '@fcd/proto';
import { AppError } from '@fcd/service-kit';
import type { AuditActor, AuditRecord } from '../domain/audit';
import type { UsageMeter } from '../meter/index';
import type { AccountStore } from '../store/accounts';

/**
 * The account's history over gRPC: its audit log (GET /v1/account/audit-log) and its usage per
 * day (GET /v1/account/usage/daily). Each names the account the gateway authenticated.
 */
export function historyHandlers(accounts: AccountStore, meter: UsageMeter) {
  const account = (id: string) => {
    if (!id) throw new AppError('VALIDATION_ERROR', 'account_id is required.');
    return id;
  };
  return {
    async listAuditLog(request: ListAuditLogRequest): Promise<ListAuditLogResponse> {
      const page = await accounts.keys.auditLog(account(request.accountId), {
        limit: request.limit === 0 ? undefined : request.limit,
        cursor: request.cursor,
      });
      return create(ListAuditLogResponseSchema, {
        entries: page.items.map(toEntry),
        limit: page.limit,
        hasMore: page.has_more,
        ...(page.next_cursor === null ? {} : { nextCursor: page.next_cursor }),
      });
    },
    async getDailyUsage(request: GetDailyUsageRequest): Promise<GetDailyUsageResponse> {
      const found = await meter.dailyUsage(account(request.accountId), {
        ...(request.from === undefined ? {} : { from: request.from }),
        ...(request.to === undefined ? {} : { to: request.to }),
      });
      if (!found) throw new AppError('NOT_FOUND', 'No such account.');
      return create(GetDailyUsageResponseSchema, {
        from: found.range.from,
        to: found.range.to,
        days: found.days.map((d) => ({
          date: d.date,
          requests: BigInt(d.requests),
          included: BigInt(d.included),
          overage: BigInt(d.overage),
        })),
      });
    },
  };
}

function toActor(actor: AuditActor) {
  if (actor.type === 'key') return { type: ActorType.KEY, keyId: actor.keyId };
  if (actor.type === 'portal_session') return { type: ActorType.PORTAL_SESSION, sessionId: actor.sessionId };
  return { type: ActorType.OPERATOR };
}

function toEntry(r: AuditRecord) {
  return {
    id: r.id,
    actor: toActor(r.actor),
    action: r.action,
    targetKeyId: r.targetKeyId,
    detailsJson: JSON.stringify(r.details),
    occurredAt: r.occurredAt,
  };
}
