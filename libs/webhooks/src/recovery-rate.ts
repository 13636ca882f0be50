import type { Pool } from '@fcd/service-kit';
import { RECOVER_RATE, type RecoverRate, type RecoverRateDecision, recoverRateDecision } from './recovery-rate-rule';

/**
 * Takes one call of the account's recover rate at `now` in one statement (the account's row is
 * the only lock, held for that statement), or refuses it without counting it.
 */
export async function takeRecoverCall(
  pool: Pick<Pool, 'query'>,
  accountId: string,
  now: number,
  rate: RecoverRate = RECOVER_RATE,
): Promise<RecoverRateDecision> {
  const interval = rate.windowMs / rate.limit;
  // Refused, the row is written unchanged but for `refused`: RETURNING then shows the tat that
  // refused it, as the row lock's latest version (a CTE's snapshot could be older).
  const { rows } = await pool.query<{ tat: Date; refused: boolean }>(
    `INSERT INTO webhook.recover_rate AS r (account_id, tat) VALUES ($1, $2::timestamptz + $3 * interval '1 millisecond')
     ON CONFLICT (account_id) DO UPDATE SET
       refused = GREATEST(r.tat, $2::timestamptz) + $3 * interval '1 millisecond' > $2::timestamptz + $4 * interval '1 millisecond',
       tat = CASE WHEN GREATEST(r.tat, $2::timestamptz) + $3 * interval '1 millisecond' > $2::timestamptz + $4 * interval '1 millisecond'
                  THEN r.tat ELSE GREATEST(r.tat, $2::timestamptz) + $3 * interval '1 millisecond' END
     RETURNING r.tat, r.refused`,
    [accountId, new Date(now), interval, rate.windowMs],
  );
  const row = rows[0];
  if (!row?.refused) return { allowed: true };
  const decision = recoverRateDecision(row.tat.getTime(), now, rate);
  // The statement refused it: never answer "allowed" for a call that was not counted.
  return decision.allowed ? { allowed: false, retryAfterSeconds: 1 } : decision;
}
