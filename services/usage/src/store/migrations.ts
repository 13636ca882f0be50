import type { Migration } from '@fcd/service-kit';
import { PORTAL_MIGRATION_SQL } from '../portal/migration';
import { BILLING_MIGRATION_SQL } from './billing-schema';

export const USAGE_SCHEMA = 'usage';

export const migrations: Migration[] = [
  {
    id: '0001_accounts_keys_usage',
    sql: `
      CREATE TABLE tiers (
        name text PRIMARY KEY,
        daily_limit integer NOT NULL CHECK (daily_limit > 0),
        hard_limit boolean NOT NULL,
        overage_rate_usd numeric(12, 6) NOT NULL DEFAULT 0,
        rank integer NOT NULL UNIQUE
      );
      INSERT INTO tiers (name, daily_limit, hard_limit, overage_rate_usd, rank) VALUES
        ('free', 100, true, 0, 0),
        ('pro', 25000, false, 0.003, 1),
        ('enterprise', 250000, false, 0.002, 2);

      CREATE TABLE accounts (
        id text PRIMARY KEY,
        name text NOT NULL,
        tier text NOT NULL REFERENCES tiers (name),
        daily_limit_override integer CHECK (daily_limit_override > 0),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );

      CREATE TABLE api_keys (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        digest text NOT NULL UNIQUE,
        last4 text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz
      );
      CREATE INDEX api_keys_account_idx ON api_keys (account_id);

      -- Requests per account per UTC day. Written by the usage service's
      -- batched flusher with GREATEST(), so writes are idempotent and any
      -- number of replicas may flush the same counter.
      CREATE TABLE daily_usage (
        account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        day date NOT NULL,
        request_count bigint NOT NULL CHECK (request_count >= 0),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (account_id, day)
      );
    `,
  },
  {
    // Keys managed by the account itself (docs/api.md, "API keys"): several per account, each with
    // a name, the first 8 characters of the key for recognising it, when it was last used (written
    // with the batched flush of the counts) and an optional expiry. Counting stays per account.
    // Keys made before this have no prefix (only their digest was kept) and are named "default".
    id: '0002_account_keys',
    sql: `
      ALTER TABLE api_keys
        ADD COLUMN name text NOT NULL DEFAULT 'default' CHECK (char_length(name) BETWEEN 1 AND 100),
        ADD COLUMN prefix text CHECK (prefix IS NULL OR char_length(prefix) = 8),
        ADD COLUMN last_used_at timestamptz,
        ADD COLUMN expires_at timestamptz;
      CREATE INDEX api_keys_account_live_idx ON api_keys (account_id) WHERE revoked_at IS NULL;
    `,
  },
  {
    // The audit log of key management (docs/api.md, "Audit log"): one row per change, written in
    // the change's transaction. seq orders the log (newest first) and pages it. The actor types
    // and actions are named CHECKs, widened by dropping and adding them again (domain/audit.ts).
    id: '0003_audit_log',
    sql: `
      CREATE TABLE audit_log (
        seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        actor_type text NOT NULL CONSTRAINT audit_log_actor_type_check CHECK (actor_type IN ('key', 'operator')),
        actor_key_id text CONSTRAINT audit_log_actor_key_check CHECK ((actor_type = 'key') = (actor_key_id IS NOT NULL)),
        action text NOT NULL
          CONSTRAINT audit_log_action_check CHECK (action IN ('key.created', 'key.renamed', 'key.revoked', 'key.rolled')),
        target_key_id text NOT NULL,
        details jsonb NOT NULL DEFAULT '{}',
        occurred_at timestamptz NOT NULL
      );
      CREATE INDEX audit_log_account_idx ON audit_log (account_id, seq DESC);
    `,
  },
  {
    // The customer portal's one-time sign-in links and sessions (portal/migration.ts; ADR 0016).
    id: '0004_portal_sessions',
    sql: PORTAL_MIGRATION_SQL,
  },
  {
    // Billing close (docs/metering.md, "Billing close"): the tier history (one row at the account's
    // creation, then one per change of tier or daily limit, written by a trigger in the same
    // transaction as the change, whoever makes it), the immutable monthly statements, their
    // adjustment rows and the record of each completed close.
    id: '0005_billing',
    sql: BILLING_MIGRATION_SQL,
  },
  {
    // A customer-portal session as the actor of a key change (docs/api.md, "Audit log"; ADR 0016):
    // its public id (pses_…), never its token. key ⇔ actor_key_id, portal_session ⇔ actor_session_id.
    id: '0006_audit_portal_actor',
    sql: `
      ALTER TABLE audit_log
        DROP CONSTRAINT audit_log_actor_type_check,
        ADD CONSTRAINT audit_log_actor_type_check CHECK (actor_type IN ('key', 'operator', 'portal_session')),
        ADD COLUMN actor_session_id text,
        DROP CONSTRAINT audit_log_actor_key_check,
        ADD CONSTRAINT audit_log_actor_key_check CHECK (
          (actor_type = 'key') = (actor_key_id IS NOT NULL) AND (actor_type = 'portal_session') = (actor_session_id IS NOT NULL)
        );
    `,
  },
];
