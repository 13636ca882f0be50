/**
 * The customer portal's sign-in (docs/api.md, "Portal"; ADR 0016): one-time links minted by the
 * operator and the sessions they (or an API key) open. Only digests of the tokens are kept. A link
 * is redeemed by one UPDATE … WHERE used_at IS NULL AND expires_at > now, so it opens one session
 * however many redeem it at once. A session made from a key names it: it ends with the key.
 */
export const PORTAL_MIGRATION_SQL = `
  CREATE TABLE portal_links (
    digest text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
  );
  CREATE INDEX portal_links_account_idx ON portal_links (account_id);

  CREATE TABLE portal_sessions (
    id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    digest text NOT NULL UNIQUE,
    origin text NOT NULL CHECK (origin IN ('link', 'key')),
    key_id text REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    CHECK ((origin = 'key') = (key_id IS NOT NULL))
  );
  CREATE INDEX portal_sessions_account_idx ON portal_sessions (account_id);
`;
