import type { FcdClient, Result } from './client.js';

/**
 * The account's history, as named helpers over the client: its audit log of key changes and its
 * usage per UTC day (docs/api.md, "Audit log" and "Usage history"). They send what `GET` sends
 * (the key, retries, typed errors) and need nothing but the client.
 */

/** One change of the account's keys. */
export interface AuditEntry {
  /** `aud_<uuid>` */
  id: string;
  /** Who made it: `{ type: 'key', key_id }` (the account, through that key) or `{ type: 'operator' }`; more types may come. */
  actor: { type: string; key_id?: string };
  /** `key.created`, `key.renamed`, `key.revoked`, `key.rolled`; more actions may come. */
  action: string;
  /** The key changed (for `key.rolled`, the key rolled). */
  key_id: string;
  /** What changed: `name`, `previous_name`, `expires_at`, `new_key_id`, `expires_in_seconds`, `was_live`. */
  details: Record<string, unknown>;
  occurred_at: string;
}

/** One UTC day: its requests, the daily limit it includes and the requests over it billed as overage. */
export interface DailyUsage {
  date: string;
  requests: number;
  included: number;
  overage: number;
}

export interface DailyUsageRange {
  from: string;
  to: string;
  /** Every day of the range, oldest first. */
  days: DailyUsage[];
}

interface Untyped {
  GET(path: string, init?: object): Promise<Result<unknown>>;
  items(path: string, init?: object): AsyncGenerator<unknown>;
}

const untyped = (client: FcdClient) => client as unknown as Untyped;

/**
 * Every entry of the account's audit log, newest first: one request per page of `limit` (1–100,
 * default 25), made when the loop asks for the next entry; `cursor` resumes a walk.
 */
export function auditLog(client: FcdClient, query: { limit?: number; cursor?: string } = {}): AsyncGenerator<AuditEntry> {
  return untyped(client).items('/v1/account/audit-log', { params: { query } }) as AsyncGenerator<AuditEntry>;
}

/**
 * The account's usage per UTC day from `from` to `to` (`YYYY-MM-DD`, at most 400 days; by default
 * the 30 days ending today): the same figures as billing.
 */
export async function dailyUsage(client: FcdClient, query: { from?: string; to?: string } = {}): Promise<Result<DailyUsageRange>> {
  const result = await untyped(client).GET('/v1/account/usage/daily', { params: { query } });
  return { ...result, data: (result.data as { data: DailyUsageRange }).data };
}
