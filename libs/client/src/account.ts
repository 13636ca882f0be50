import type { FcdClient, ListItem, Result, SuccessData } from './client.js';

/**
 * The account's history, as named helpers over the client: its audit log of key changes and its
 * usage per UTC day (docs/api.md, "Audit log" and "Usage history"). They send what `GET` sends
 * (the key, retries, typed errors) and need nothing but the client.
 */

/** One change of the account's keys (the generated schema of `GET /v1/account/audit-log`). */
export type AuditEntry = ListItem<'/v1/account/audit-log'>;

/** The account's usage per UTC day (the generated schema of `GET /v1/account/usage/daily`). */
export type DailyUsageRange = SuccessData<'/v1/account/usage/daily', 'get'>['data'];

/** One UTC day: its requests, the daily limit it includes and the requests over it billed as overage. */
export type DailyUsage = DailyUsageRange['days'][number];

/**
 * Every entry of the account's audit log, newest first: one request per page of `limit` (1–100,
 * default 25), made when the loop asks for the next entry; `cursor` resumes a walk.
 */
export function auditLog(client: FcdClient, query: { limit?: number; cursor?: string } = {}): AsyncGenerator<AuditEntry> {
  return client.items('/v1/account/audit-log', { params: { query } });
}

/**
 * The account's usage per UTC day from `from` to `to` (`YYYY-MM-DD`, at most 400 days; by default
 * the 30 days ending today): the same figures as billing.
 */
export async function dailyUsage(client: FcdClient, query: { from?: string; to?: string } = {}): Promise<Result<DailyUsageRange>> {
  const result = await client.GET('/v1/account/usage/daily', { params: { query } });
  return { ...result, data: result.data.data };
}
