import { create } from '@bufbuild/protobuf';
import { fromGrpcError, type TypedClient } from '@fcd/grpc';
import { ActorType, type AuditEntry, GetDailyUsageRequestSchema, ListAuditLogRequestSchema, type UsageService } from '@fcd/proto';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { requireAccount } from '../auth/account';
import { AuditLogQuery, AuditLogResponse, DailyUsageQuery, DailyUsageResponse } from './account-history-schema';

const AUDIT_LOG_PATH = '/v1/account/audit-log';
const DAILY_USAGE_PATH = '/v1/account/usage/daily';

async function call<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw fromGrpcError(err, 'usage');
  }
}

function actorView(actor: AuditEntry['actor']) {
  if (actor?.type === ActorType.KEY) return { type: 'key', key_id: actor.keyId };
  if (actor?.type === ActorType.PORTAL_SESSION) return { type: 'portal_session', session_id: actor.sessionId };
  return { type: 'operator' };
}

function entryView(e: AuditEntry) {
  return {
    id: e.id,
    actor: actorView(e.actor),
    action: e.action,
    key_id: e.targetKeyId,
    details: JSON.parse(e.detailsJson) as Record<string, unknown>,
    occurred_at: e.occurredAt,
  };
}

/**
 * The account's history, every tier, counted like any /v1 request (docs/metering.md): its audit
 * log of key changes (newest first, keyset pages) and its usage per UTC day (the figures billing
 * computes). The usage service answers both, for the account the gateway authenticated.
 */
export function registerAccountHistoryRoutes(app: FastifyInstance, deps: { usage: TypedClient<typeof UsageService> }): void {
  const { usage } = deps;
  app.get<{ Querystring: Static<typeof AuditLogQuery> }>(
    AUDIT_LOG_PATH,
    { schema: { querystring: AuditLogQuery, response: { 200: AuditLogResponse } } },
    async (request) => {
      const { accountId } = requireAccount(request);
      const { limit, cursor } = request.query;
      const page = await call(() =>
        usage.unary.listAuditLog(
          create(ListAuditLogRequestSchema, { accountId, limit: limit ?? 0, ...(cursor === undefined ? {} : { cursor }) }),
        ),
      );
      return {
        data: page.entries.map(entryView),
        pagination: { limit: page.limit, next_cursor: page.nextCursor ?? null, has_more: page.hasMore },
      };
    },
  );

  app.get<{ Querystring: Static<typeof DailyUsageQuery> }>(
    DAILY_USAGE_PATH,
    { schema: { querystring: DailyUsageQuery, response: { 200: DailyUsageResponse } } },
    async (request) => {
      const { accountId } = requireAccount(request);
      const { from, to } = request.query;
      const res = await call(() =>
        usage.unary.getDailyUsage(
          create(GetDailyUsageRequestSchema, { accountId, ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }) }),
        ),
      );
      return {
        data: {
          from: res.from,
          to: res.to,
          days: res.days.map((d) => ({
            date: d.date,
            requests: Number(d.requests),
            included: Number(d.included),
            overage: Number(d.overage),
          })),
        },
      };
    },
  );
}
