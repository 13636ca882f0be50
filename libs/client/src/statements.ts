import type { FcdClient, Result, SuccessData } from './client.js';

/**
 * The account's closed monthly statements (docs/api.md, "Statements"), as a named helper over the
 * client: it sends what `GET` sends (the key, retries, typed errors) and needs nothing but the client.
 */

/** One closed UTC month of the account (the generated schema of `GET /v1/account/statements`). */
export type Statement = SuccessData<'/v1/account/statements', 'get'>['data'][number];

/** One tier's part of a statement: the days billed in it and their figures. */
export type StatementTier = Statement['tiers'][number];

/** A late correction: differences added to the statement, which never changes. */
export type StatementAdjustment = Statement['adjustments'][number];

/** The account's closed statements, newest period first (the current month is not there until it is closed). */
export async function listStatements(client: FcdClient): Promise<Result<Statement[]>> {
  const result = await client.GET('/v1/account/statements');
  return { ...result, data: result.data.data };
}
