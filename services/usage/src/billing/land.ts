import type { PeriodBounds } from '../domain/proration';
import type { AccountStore } from '../store/accounts';
import type { CounterStore } from '../store/counters';

/**
 * Lands the period's live counts before a close (docs/metering.md, "Billing close", "Every count
 * landed"): every count is answered from a Redis counter (fail-open counts go to Postgres directly),
 * and the write-behind only copies those counters, so copying every Redis counter of the period's
 * days into Postgres with GREATEST — the statement of the flush and the reconciliation — stores
 * every count any replica has answered, flushed or not. A Redis that cannot be read throws: the
 * close stops before writing anything.
 */
export function landFromRedis(
  counters: Pick<CounterStore, 'scanAll'>,
  accounts: Pick<AccountStore, 'upsertDailyCounts'>,
  before?: () => Promise<unknown>,
): (bounds: PeriodBounds) => Promise<number> {
  return async (bounds) => {
    await before?.();
    const live = (await counters.scanAll()).filter((c) => c.day >= bounds.start && c.day <= bounds.end);
    for (let i = 0; i < live.length; i += 1000) await accounts.upsertDailyCounts(live.slice(i, i + 1000));
    return live.length;
  };
}
