import type { PeriodBounds } from '../domain/proration';
import type { StatementStore } from '../store/statements';

export interface VerifyResult {
  period: string;
  statements: number;
  /** Accounts whose statement (with its adjustments) does not total their stored daily counts. */
  mismatches: Array<{ accountId: string; statementRequests: number | null; storedRequests: number }>;
}

/**
 * Reconciliation (docs/metering.md, "Reconciliation"): each statement's total requests, with its
 * adjustments, equals the sum of the account's stored daily counts of the period; an account with
 * stored counts and no statement is a mismatch too.
 */
export async function verifyPeriod(statements: StatementStore, bounds: PeriodBounds): Promise<VerifyResult> {
  const [list, stored] = await Promise.all([statements.list({ period: bounds.period }), statements.totalsByAccount(bounds)]);
  const mismatches: VerifyResult['mismatches'] = [];
  const seen = new Set<string>();
  for (const s of list) {
    seen.add(s.accountId);
    const billed = s.adjustments.reduce((n, a) => n + a.totalRequests, s.totalRequests);
    const counted = stored.get(s.accountId) ?? 0;
    if (billed !== counted) mismatches.push({ accountId: s.accountId, statementRequests: billed, storedRequests: counted });
  }
  for (const [accountId, counted] of stored)
    if (!seen.has(accountId) && counted > 0) mismatches.push({ accountId, statementRequests: null, storedRequests: counted });
  return { period: bounds.period, statements: list.length, mismatches };
}
