import type { FcdClient, Result } from './client.js';

/**
 * The account's closed monthly statements (docs/api.md, "Statements"), as a named helper over the
 * client: it sends what `GET` sends (the key, retries, typed errors) and needs nothing but the client.
 */

/** One tier's part of a statement: the days billed in it and their figures. */
export interface StatementTier {
  tier: string;
  days: number;
  daily_limit: number;
  included_requests: number;
  overage_requests: number;
  /** Decimal strings, exact: never parse them into floating point to add them. */
  overage_rate_usd: string;
  amount_usd: string;
}

/** A late correction: differences added to the statement, which never changes. */
export interface StatementAdjustment {
  total_requests: number;
  included_requests: number;
  overage_requests: number;
  amount_usd: string;
  created_at: string;
}

/** One closed UTC month of the account. */
export interface Statement {
  /** `YYYY-MM` */
  period: string;
  tiers: StatementTier[];
  total_requests: number;
  included_requests: number;
  overage_requests: number;
  overage_rate_usd: string;
  amount_usd: string;
  closed_at: string;
  adjustments: StatementAdjustment[];
}

/** The account's closed statements, newest period first (the current month is not there until it is closed). */
export async function listStatements(client: FcdClient): Promise<Result<Statement[]>> {
  const result = await (client as unknown as { GET(path: string): Promise<Result<unknown>> }).GET('/v1/account/statements');
  return { ...result, data: (result.data as { data: Statement[] }).data };
}
