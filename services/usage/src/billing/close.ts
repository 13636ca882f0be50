/**
 * The billing close (docs/metering.md, "Billing close"): one immutable statement per account for a
 * finished period, a late correction as an adjustment row, and a transaction per account so a close
 * killed part-way is finished by the next run with the same statements.
 */
import { AppError, type Clock, withTransaction } from '@fcd/service-kit';
import { computeStatement, type PeriodBounds, periodBounds, type StatementFigures } from '../domain/proration';
import type { StatementStore, StoredStatement } from '../store/statements';

/**
 * How long after a period's end it may be closed: a batch decided on the period's last day is
 * counted within its count-by time (at most the gateway's AUTH_DEADLINE_MS, seconds) or not at all,
 * so after this no count of the period can still change.
 */
const SETTLE_MS = 5 * 60_000;

export interface CloseDeps {
  statements: StatementStore;
  clock: Clock;
  /**
   * Copies the period's live Redis counters into Postgres (GREATEST), so every count answered
   * before the period ended is stored before the statements are computed; it throws when Redis
   * cannot be read, and the close stops (nothing written).
   */
  landCounts(bounds: PeriodBounds): Promise<number>;
  /** Called after each account's statement is committed (metrics; the CLI's test hook). */
  onAccount?(outcome: AccountOutcome): Promise<void> | void;
}

export interface AccountOutcome {
  accountId: string;
  outcome: 'closed' | 'adjusted' | 'unchanged';
  amountMicroUsd: bigint;
}

export interface CloseResult {
  period: string;
  accounts: number;
  closed: number;
  adjusted: number;
  unchanged: number;
  /** Live counters copied from Redis before computing. */
  countersLanded: number;
}

/** The period's bounds, or a VALIDATION_ERROR naming the expected shape. */
export function requirePeriod(period: string | undefined): PeriodBounds {
  const bounds = period === undefined ? undefined : periodBounds(period);
  if (!bounds) throw new AppError('VALIDATION_ERROR', `period must be a month as YYYY-MM (got ${JSON.stringify(period ?? '')})`);
  return bounds;
}

/** Refuses a period that has not ended (and settled): nothing is written. */
function requireEnded(bounds: PeriodBounds, now: number): void {
  const from = bounds.endMs + SETTLE_MS;
  if (now < from)
    throw new AppError('VALIDATION_ERROR', `period ${bounds.period} has not ended: it can be closed from ${new Date(from).toISOString()}`);
}

/** The figures a stored statement says today: the statement plus its adjustments. */
function standing(s: StoredStatement): {
  totalRequests: number;
  includedRequests: number;
  overageRequests: number;
  amountMicroUsd: bigint;
} {
  return s.adjustments.reduce(
    (acc, a) => ({
      totalRequests: acc.totalRequests + a.totalRequests,
      includedRequests: acc.includedRequests + a.includedRequests,
      overageRequests: acc.overageRequests + a.overageRequests,
      amountMicroUsd: acc.amountMicroUsd + a.amountMicroUsd,
    }),
    {
      totalRequests: s.totalRequests,
      includedRequests: s.includedRequests,
      overageRequests: s.overageRequests,
      amountMicroUsd: s.amountMicroUsd,
    },
  );
}

/** One account's close, in its own transaction: insert the statement, or the difference as an adjustment. */
async function closeAccount(deps: CloseDeps, accountId: string, bounds: PeriodBounds, now: number): Promise<AccountOutcome> {
  const { statements } = deps;
  return withTransaction(statements.pool, async (client) => {
    await statements.lock(client, accountId, bounds.period);
    const figures: StatementFigures = computeStatement({
      bounds,
      history: await statements.history(client, accountId, bounds),
      counts: await statements.counts(client, accountId, bounds),
    });
    if (await statements.insert(client, accountId, bounds.period, figures, now))
      return { accountId, outcome: 'closed', amountMicroUsd: figures.amountMicroUsd };
    const [stored] = await statements.list({ period: bounds.period, accountId }, client);
    const was = standing(stored as StoredStatement);
    const delta = {
      totalRequests: figures.totalRequests - was.totalRequests,
      includedRequests: figures.includedRequests - was.includedRequests,
      overageRequests: figures.overageRequests - was.overageRequests,
      amountMicroUsd: figures.amountMicroUsd - was.amountMicroUsd,
    };
    if (delta.totalRequests === 0 && delta.includedRequests === 0 && delta.overageRequests === 0 && delta.amountMicroUsd === 0n)
      return { accountId, outcome: 'unchanged', amountMicroUsd: 0n };
    await statements.addAdjustment(client, accountId, bounds.period, delta, now);
    return { accountId, outcome: 'adjusted', amountMicroUsd: delta.amountMicroUsd };
  });
}

/**
 * Closes a finished period: refuses an open one, lands the live counters, then closes each account
 * (ordered by id) in its own transaction. Idempotent: a re-run over unchanged counts writes nothing.
 */
export async function closePeriod(deps: CloseDeps, period: string | undefined): Promise<CloseResult> {
  const bounds = requirePeriod(period);
  const now = deps.clock.now();
  requireEnded(bounds, now);
  const countersLanded = await deps.landCounts(bounds);
  const result: CloseResult = { period: bounds.period, accounts: 0, closed: 0, adjusted: 0, unchanged: 0, countersLanded };
  for (const accountId of await deps.statements.accountsOf(bounds)) {
    const outcome = await closeAccount(deps, accountId, bounds, now);
    result.accounts += 1;
    result[outcome.outcome] += 1;
    await deps.onAccount?.(outcome);
  }
  await deps.statements.completed(bounds.period, result.accounts, now);
  return result;
}
