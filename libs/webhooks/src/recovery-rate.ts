import type { Pool } from '@fcd/service-kit';

/**
 * The per-account rate of POST /v1/webhooks/{id}/recover (docs/webhooks.md "Recovery"): at most
 * `limit` calls in any `windowMs`, as a GCRA in table `webhook.recover_rate` (one row per
 * account, its theoretical arrival time), so it holds across every replica of the webhook service:
 * a burst of `limit` calls, then one every `windowMs / limit`.
 */
export interface RecoverRate {
  limit: number;
  windowMs: number;
}

/** 10 calls a minute per account: a burst of 10, then one every 6 s. */
export const RECOVER_RATE: RecoverRate = { limit: 10, windowMs: 60_000 };

export type RecoverRateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/**
 * The GCRA's decision for a call at `now` with the account's theoretical arrival time `tat`
 * (epoch ms, null: no call yet): allowed when the new tat stays within one window of now; else
 * the whole seconds until it would be (at least 1). The SQL of `takeRecoverCall` applies the same rule.
 */
export function recoverRateDecision(tat: number | null, now: number, rate: RecoverRate = RECOVER_RATE): RecoverRateDecision {
  const interval = rate.windowMs / rate.limit;
  const next = Math.max(tat ?? now, now) + interval;
  if (next - now <= rate.windowMs) return { allowed: true };
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((next - rate.windowMs - now) / 1000)) };
}

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
