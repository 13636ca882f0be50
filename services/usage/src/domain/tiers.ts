/** A tier as stored in usage.tiers (table-driven, so tiers can be added without code). */
export interface Tier {
  name: string;
  /** Default daily limit; an account may override it (enterprise). */
  dailyLimit: number;
  /** Free: requests over the limit are refused. Pro and above: billed as overage. */
  hardLimit: boolean;
  /** Decimal string, e.g. "0.003". */
  overageRateUsd: string;
  /** free 0 < pro 1 < enterprise 2: "Pro and above" means rank >= 1. */
  rank: number;
}

/** The account behind an API key, as the meter needs it. */
export interface KeyPrincipal {
  keyId: string;
  accountId: string;
  tier: string;
  tierRank: number;
  dailyLimit: number;
  hardLimit: boolean;
  overageRateUsd: string;
  revoked: boolean;
  /** Unix ms after which the key no longer authenticates (set when rolled or created with an expiry); null: never. */
  expiresAt?: number | null;
  /** Set when the credential is a customer-portal session: its public id (`pses_<uuid>`), the actor of its key changes. */
  sessionId?: string;
}
