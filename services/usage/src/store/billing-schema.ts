/**
 * The SQL of migration 0005_billing (docs/metering.md, "Billing close"), run with search_path set
 * to the usage schema.
 *
 * - tier_history: the tier in force from `effective_at` on, with the limit and rate of that moment.
 *   Written by triggers on usage.accounts, so every tier change (admin API, CLI, SQL) adds its row in
 *   the change's own transaction: at creation (effective at created_at) and at each change of tier
 *   or daily limit (effective at the row's new updated_at, or the transaction's time when the
 *   change leaves updated_at as it was). Existing accounts get one row at their creation with
 *   their current tier (the history before this migration is not known).
 * - statements: one per account and period, never updated nor deleted (a trigger refuses both).
 * - statement_adjustments: a late correction of a statement, as the difference, never an edit.
 * - billing_closes: the periods whose close ran to the end (the alert "not closed by the 2nd").
 */
export const BILLING_MIGRATION_SQL = `
  CREATE TABLE tier_history (
    id bigserial PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    effective_at timestamptz NOT NULL,
    tier text NOT NULL REFERENCES tiers (name),
    daily_limit integer NOT NULL CHECK (daily_limit > 0),
    hard_limit boolean NOT NULL,
    overage_rate_usd numeric(12, 6) NOT NULL
  );
  CREATE INDEX tier_history_account_idx ON tier_history (account_id, effective_at, id);

  CREATE FUNCTION record_tier() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    INSERT INTO usage.tier_history (account_id, effective_at, tier, daily_limit, hard_limit, overage_rate_usd)
    -- Effective at creation, or at the change's updated_at; a change that leaves updated_at as it
    -- was takes the transaction's time instead.
    SELECT NEW.id,
           CASE WHEN TG_OP = 'INSERT' THEN NEW.created_at
                WHEN NEW.updated_at IS DISTINCT FROM OLD.updated_at THEN NEW.updated_at
                ELSE now() END,
           t.name,
           COALESCE(NEW.daily_limit_override, t.daily_limit), t.hard_limit, t.overage_rate_usd
      FROM usage.tiers t WHERE t.name = NEW.tier;
    RETURN NULL;
  END
  $fn$;
  CREATE TRIGGER accounts_tier_created AFTER INSERT ON accounts FOR EACH ROW EXECUTE FUNCTION record_tier();
  CREATE TRIGGER accounts_tier_changed AFTER UPDATE OF tier, daily_limit_override ON accounts FOR EACH ROW
    WHEN (OLD.tier IS DISTINCT FROM NEW.tier OR OLD.daily_limit_override IS DISTINCT FROM NEW.daily_limit_override)
    EXECUTE FUNCTION record_tier();

  INSERT INTO tier_history (account_id, effective_at, tier, daily_limit, hard_limit, overage_rate_usd)
  SELECT a.id, a.created_at, a.tier, COALESCE(a.daily_limit_override, t.daily_limit), t.hard_limit, t.overage_rate_usd
    FROM accounts a JOIN tiers t ON t.name = a.tier;

  CREATE TABLE statements (
    account_id text NOT NULL REFERENCES accounts (id),
    period text NOT NULL CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    tiers jsonb NOT NULL,
    total_requests bigint NOT NULL CHECK (total_requests >= 0),
    included_requests bigint NOT NULL CHECK (included_requests >= 0),
    overage_requests bigint NOT NULL CHECK (overage_requests >= 0),
    overage_rate_usd numeric(12, 6) NOT NULL,
    amount_micro_usd bigint NOT NULL CHECK (amount_micro_usd >= 0),
    closed_at timestamptz NOT NULL,
    PRIMARY KEY (account_id, period)
  );
  CREATE INDEX statements_period_idx ON statements (period, account_id);

  CREATE TABLE statement_adjustments (
    id bigserial PRIMARY KEY,
    account_id text NOT NULL,
    period text NOT NULL,
    total_requests bigint NOT NULL,
    included_requests bigint NOT NULL,
    overage_requests bigint NOT NULL,
    amount_micro_usd bigint NOT NULL,
    created_at timestamptz NOT NULL,
    FOREIGN KEY (account_id, period) REFERENCES statements (account_id, period)
  );
  CREATE INDEX statement_adjustments_idx ON statement_adjustments (account_id, period, id);

  CREATE FUNCTION refuse_edit() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    RAISE EXCEPTION '% rows are immutable: add an adjustment instead', TG_TABLE_NAME;
  END
  $fn$;
  CREATE TRIGGER statements_immutable BEFORE UPDATE OR DELETE ON statements FOR EACH ROW EXECUTE FUNCTION refuse_edit();
  CREATE TRIGGER statement_adjustments_immutable BEFORE UPDATE OR DELETE ON statement_adjustments
    FOR EACH ROW EXECUTE FUNCTION refuse_edit();

  CREATE TABLE billing_closes (
    period text PRIMARY KEY,
    first_completed_at timestamptz NOT NULL,
    last_completed_at timestamptz NOT NULL,
    accounts integer NOT NULL
  );
`;
