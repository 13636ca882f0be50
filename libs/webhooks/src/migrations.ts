import type { Migration } from '@fcd/service-kit';

/**
 * Schema `webhook`, shared by the webhook API (subscriptions) and the
 * dispatcher (deliveries and their attempts). Applied with service-kit's
 * `migrate(pool, WEBHOOK_SCHEMA, webhookMigrations)`; ids are never renamed,
 * new changes get new ids.
 */
export const WEBHOOK_SCHEMA = 'webhook';

export const webhookMigrations: Migration[] = [
  {
    id: '0001_subscriptions',
    sql: `
      CREATE TABLE subscriptions (
        id                   text COLLATE "C" PRIMARY KEY CHECK (id ~ '^wh_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
        account_id           text NOT NULL,
        url                  text NOT NULL CHECK (char_length(url) <= 2048),
        events               text[] NOT NULL CHECK (cardinality(events) > 0),
        -- NULL = every facility; never an empty array.
        facility_ids         uuid[] CHECK (facility_ids IS NULL OR cardinality(facility_ids) BETWEEN 1 AND 1000),
        -- AES-256-GCM ciphertext 'v1:<key id>:<base64url>' (libs/webhooks/src/secrets.ts), AAD = id.
        secret_ciphertext    text NOT NULL,
        secret_last4         text NOT NULL CHECK (char_length(secret_last4) = 4),
        is_active            boolean NOT NULL DEFAULT true,
        created_at           timestamptz NOT NULL,
        updated_at           timestamptz NOT NULL,
        deactivated_at       timestamptz,
        deactivation_reason  text,
        -- Failure bookkeeping, maintained by the dispatcher; reset on reactivation.
        consecutive_failures integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
        last_failure_at      timestamptz,
        last_success_at      timestamptz,
        CHECK (is_active = (deactivated_at IS NULL)),
        CHECK ((deactivated_at IS NULL) = (deactivation_reason IS NULL))
      );
      -- The account's list, newest first (keyset pagination), and its count.
      CREATE INDEX subscriptions_account_created ON subscriptions (account_id, created_at DESC, id DESC);
      -- The dispatcher's fan-out: active subscriptions listing an event type.
      CREATE INDEX subscriptions_active_events ON subscriptions USING gin (events) WHERE is_active;
    `,
  },
  {
    id: '0002_deliveries',
    sql: `
      CREATE TABLE deliveries (
        id               text COLLATE "C" PRIMARY KEY CHECK (id ~ '^dlv_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
        subscription_id  text NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
        event_id         text NOT NULL,
        event_type       text NOT NULL,
        payload          jsonb NOT NULL,
        status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
        attempt_count    integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
        next_attempt_at  timestamptz,
        first_attempt_at timestamptz,
        last_attempt_at  timestamptz,
        created_at       timestamptz NOT NULL,
        updated_at       timestamptz NOT NULL,
        -- At-least-once consumption: a redelivered event creates no second delivery.
        UNIQUE (subscription_id, event_id)
      );
      -- Due work, polled with FOR UPDATE SKIP LOCKED.
      CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
      CREATE INDEX deliveries_subscription_created ON deliveries (subscription_id, created_at DESC, id DESC);

      CREATE TABLE delivery_attempts (
        delivery_id     text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
        attempt         integer NOT NULL CHECK (attempt >= 1),
        started_at      timestamptz NOT NULL,
        duration_ms     integer,
        response_status integer,
        error           text,
        outcome         text NOT NULL CHECK (outcome IN ('success', 'failure')),
        PRIMARY KEY (delivery_id, attempt)
      );
    `,
  },
  {
    id: '0003_dispatch',
    sql: `
      -- The envelope exactly as it was published: signed and sent byte for byte on every attempt
      -- (payload jsonb reorders keys). NULL for rows written before this migration.
      ALTER TABLE deliveries ADD COLUMN body text;
      -- A test event or a manual retry: one attempt, no automatic retries, never deactivates.
      ALTER TABLE deliveries ADD COLUMN manual boolean NOT NULL DEFAULT false;
      -- Cancelling the pending work of a deactivated subscription.
      CREATE INDEX deliveries_pending_subscription ON deliveries (subscription_id) WHERE status = 'pending';
    `,
  },
  {
    id: '0004_delivery_trace_context',
    sql: `
      -- The W3C trace context (JSON {traceparent, tracestate}) of the dispatcher's handling of the
      -- event that created the delivery; every attempt's span continues that trace. NULL when untraced.
      ALTER TABLE deliveries ADD COLUMN trace_context text;
    `,
  },
  {
    id: '0005_secret_rotation_overlap',
    sql: `
      -- A rotation with overlap keeps the previous secret (encrypted like the current one, same
      -- subscription id as associated data) valid for signing until secret_rotation_ends_at.
      ALTER TABLE subscriptions ADD COLUMN previous_secret_ciphertext text;
      ALTER TABLE subscriptions ADD COLUMN secret_rotation_ends_at timestamptz;
    `,
  },
];
