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
