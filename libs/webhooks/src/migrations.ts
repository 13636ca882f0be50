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
  {
    id: '0006_event_log',
    sql: `
      -- The durable event log (docs/adr/0002-event-log-in-postgres.md): every event the dispatcher
      -- consumes, kept EVENT_RETENTION_DAYS for recovery and the events API (GET /v1/events).
      -- position: assigned under a transaction-scoped advisory lock (libs/webhooks/src/event-log.ts),
      -- so positions grow in commit order and a reader after position p never misses a later commit.
      CREATE TABLE events (
        position     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id           text COLLATE "C" NOT NULL UNIQUE CHECK (id ~ '^evt_[A-Za-z0-9-]{1,100}$'),
        type         text NOT NULL,
        created_at   timestamptz NOT NULL,
        -- The facilities the event concerns (matching.ts eventFacilityIds); empty when none.
        facility_ids uuid[] NOT NULL,
        -- The envelope exactly as published: what the events API and recovered deliveries send.
        body         text NOT NULL,
        recorded_at  timestamptz NOT NULL
      );
      -- Recovery windows, the since filter and pruning.
      CREATE INDEX events_created_at ON events (created_at);
      CREATE INDEX events_type_position ON events (type, position);
      CREATE INDEX events_facility_ids ON events USING gin (facility_ids);

      -- A recovery enqueues new deliveries of events already fanned out (a cancelled or failed
      -- delivery stays in the log as it was), so "one delivery per subscription and event" holds for
      -- the fan-out only.
      ALTER TABLE deliveries ADD COLUMN recovery boolean NOT NULL DEFAULT false;
      CREATE UNIQUE INDEX deliveries_fan_out_once ON deliveries (subscription_id, event_id) WHERE NOT recovery;
      ALTER TABLE deliveries DROP CONSTRAINT deliveries_subscription_id_event_id_key;
      -- With deliveries_fan_out_once, what recovery looks up: the deliveries of one subscription and event.
      CREATE INDEX deliveries_recovered ON deliveries (subscription_id, event_id) WHERE recovery;
    `,
  },
  {
    id: '0007_attempt_debug',
    sql: `
      -- What the owner needs to debug a receiver (docs/webhooks.md, "The delivery log"), per attempt:
      -- the headers sent (signatures included; never the secret), the response headers (at most
      -- 8 KiB of names and values) and the first 4 KiB of the response body, each with a flag when
      -- cut, and the phase timings in ms (null: the phase did not happen, e.g. a reused connection).
      -- NULL in rows written before this migration.
      ALTER TABLE delivery_attempts
        ADD COLUMN request_headers            jsonb,
        ADD COLUMN response_headers           jsonb,
        ADD COLUMN response_headers_truncated boolean NOT NULL DEFAULT false,
        ADD COLUMN response_body              text CHECK (octet_length(response_body) <= 16384),
        ADD COLUMN response_body_truncated    boolean NOT NULL DEFAULT false,
        ADD COLUMN dns_ms                     double precision CHECK (dns_ms >= 0),
        ADD COLUMN connect_ms                 double precision CHECK (connect_ms >= 0),
        ADD COLUMN tls_ms                     double precision CHECK (tls_ms >= 0),
        ADD COLUMN first_byte_ms              double precision CHECK (first_byte_ms >= 0),
        ADD COLUMN connection_reused          boolean;
    `,
  },
  {
    id: '0008_delivery_limits',
    sql: `
      -- Per-subscription limits (docs/adr/0014-per-subscription-delivery-limits.md), enforced by the
      -- dispatcher's claim across every replica. rate_limit_per_second NULL = the dispatcher's default
      -- (WEBHOOK_DEFAULT_RATE_LIMIT_PER_SECOND, none unless set); rate_tat is the pacing state (GCRA's
      -- theoretical arrival time, database clock), written only by the claim.
      ALTER TABLE subscriptions
        ADD COLUMN rate_limit_per_second integer CHECK (rate_limit_per_second BETWEEN 1 AND 1000),
        ADD COLUMN max_in_flight         integer NOT NULL DEFAULT 16 CHECK (max_in_flight BETWEEN 1 AND 64),
        ADD COLUMN rate_tat              timestamptz;
      -- The end of the lease of a claimed delivery whose attempt is not recorded yet (NULL otherwise):
      -- a subscription's in-flight count is its pending deliveries with a lease still running.
      ALTER TABLE deliveries ADD COLUMN leased_until timestamptz;
      CREATE INDEX deliveries_leased ON deliveries (subscription_id) WHERE status = 'pending' AND leased_until IS NOT NULL;
      -- The claim takes each subscription's own earliest due deliveries.
      CREATE INDEX deliveries_due_subscription ON deliveries (subscription_id, next_attempt_at) WHERE status = 'pending';
    `,
  },
  {
    id: '0009_endpoint_backoff',
    sql: `
      -- Endpoint back-off (docs/webhooks.md, "Limits, as a receiver sees them"): the claim skips a
      -- subscription until paused_until (a 429/503 Retry-After, or the circuit opened after
      -- connection failures in a row), and sends one delivery at a time while
      -- connection_failures is at the threshold (half-open). Written by the recording.
      ALTER TABLE subscriptions
        ADD COLUMN paused_until        timestamptz,
        ADD COLUMN pause_reason        text CHECK (pause_reason IN ('retry_after', 'unreachable')),
        ADD COLUMN connection_failures integer NOT NULL DEFAULT 0 CHECK (connection_failures >= 0);
      -- The pause an attempt started, shown with it in the delivery log (NULL: none).
      ALTER TABLE delivery_attempts
        ADD COLUMN paused_until timestamptz,
        ADD COLUMN pause_reason text CHECK (pause_reason IN ('retry_after', 'unreachable'));
    `,
  },
  {
    id: '0010_delivery_write_cost',
    sql: `
      -- Cuts the work of writing a delivery (docs/dispatcher.md "Cost per delivery"). Since 0003
      -- every row has its body, and nothing reads payload but the claim, for rows from before
      -- 0003: new rows leave it NULL instead of parsing the body into jsonb once more.
      ALTER TABLE deliveries ALTER COLUMN payload DROP NOT NULL;
      -- deliveries_due_subscription (0008) leads with the same column under the same predicate:
      -- this one only cost an index entry on every insert and claim.
      DROP INDEX deliveries_pending_subscription;
      -- Every reader of the due work now goes by subscription (the claim's skip scan of
      -- deliveries_due_subscription, the sweep, the worker's next wake-up): one index entry less
      -- on every insert and claim.
      DROP INDEX deliveries_due;
    `,
  },
  {
    id: '0011_recovery_bounds',
    sql: `
      -- Recovery bounded (docs/webhooks.md "Recovery"). Its window is read per event type in
      -- (created_at, position) order: equality on the first column, then a keyset range in index
      -- order, so a LIMIT stops the scan whatever the statistics say (on tables never analysed,
      -- the join this replaces took a nested-loop plan of 1-2 s).
      CREATE INDEX events_type_created ON events (type, created_at, position);
      -- "One recovery in progress per subscription": its pending recovered deliveries, and when the
      -- last is due (the 409's Retry-After). An entry for recovered rows only.
      CREATE INDEX deliveries_recovery_pending ON deliveries (subscription_id, next_attempt_at) WHERE status = 'pending' AND recovery;
      -- The per-account rate of the recover route: the GCRA's theoretical arrival time per account
      -- (libs/webhooks/src/recovery-rate.ts), shared by every replica.
      CREATE TABLE recover_rate (
        account_id text COLLATE "C" PRIMARY KEY,
        tat        timestamptz NOT NULL,
        -- Whether the account's last call was refused (its RETURNING tells the caller).
        refused    boolean NOT NULL DEFAULT false
      );
    `,
  },
  {
    id: '0012_subscription_filter',
    sql: `
      -- Subscription filters (docs/webhooks.md "Filters", libs/webhooks/src/filter.ts): null, or an
      -- object of non-empty lists of codes under states, programs, severities and epa_regions. The
      -- fan-out tests each list with ?| against the event's facets, in the statement that already
      -- joins the subscriptions: no index, no extra query.
      ALTER TABLE subscriptions
        ADD COLUMN filter jsonb CHECK (filter IS NULL OR jsonb_typeof(filter) = 'object');
    `,
  },
  {
    id: '0013_event_facets',
    sql: `
      -- Each logged event's facets (filter.ts eventFacets), as the dispatcher computes them for the
      -- fan-out, so recovery and GET /v1/events?subscription_id= test a subscription with the same
      -- SQL as the fan-out (match-sql.ts). severities is NULL for an event without severity.
      ALTER TABLE events
        ADD COLUMN states      text[] NOT NULL DEFAULT '{}',
        ADD COLUMN programs    text[] NOT NULL DEFAULT '{}',
        ADD COLUMN severities  text[],
        ADD COLUMN epa_regions text[] NOT NULL DEFAULT '{}';
      -- The events logged before: eventFacets over their bodies, written out in SQL once. Codes are
      -- the string values matching [A-Za-z0-9_]{1,16}; states and programs upper-cased, severities lower.
      UPDATE events ev
         SET states = f.states, programs = f.programs, severities = f.severities, epa_regions = f.epa_regions
        FROM (
          SELECT e.position,
                 ARRAY(SELECT DISTINCT upper(x->>'state') COLLATE "C" FROM unnest(s.snaps) x
                        WHERE jsonb_typeof(x->'state') = 'string' AND x->>'state' ~ '^[A-Za-z0-9_]{1,16}$' ORDER BY 1) AS states,
                 ARRAY(SELECT DISTINCT x->>'epa_region' COLLATE "C" FROM unnest(s.snaps) x
                        WHERE jsonb_typeof(x->'epa_region') = 'string' AND x->>'epa_region' ~ '^[A-Za-z0-9_]{1,16}$' ORDER BY 1) AS epa_regions,
                 CASE WHEN e.type = 'violation.new' THEN
                   ARRAY(SELECT upper(d.d->'violation'->>'program') WHERE jsonb_typeof(d.d->'violation'->'program') = 'string'
                            AND d.d->'violation'->>'program' ~ '^[A-Za-z0-9_]{1,16}$')
                 ELSE
                   ARRAY(SELECT DISTINCT upper(p #>> '{}') COLLATE "C" FROM unnest(s.snaps) x
                          CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(x->'programs') = 'array' THEN x->'programs' ELSE '[]' END) p
                          WHERE jsonb_typeof(p) = 'string' AND p #>> '{}' ~ '^[A-Za-z0-9_]{1,16}$' ORDER BY 1)
                 END AS programs,
                 CASE WHEN e.type = 'violation.new' THEN
                   ARRAY(SELECT lower(d.d->'violation'->>'severity') WHERE jsonb_typeof(d.d->'violation'->'severity') = 'string'
                            AND d.d->'violation'->>'severity' ~ '^[A-Za-z0-9_]{1,16}$')
                 END AS severities
            FROM events e
           CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(e.body::jsonb->'data') = 'object' THEN e.body::jsonb->'data' ELSE '{}' END AS d) d
           CROSS JOIN LATERAL (
             SELECT ARRAY(
               SELECT d.d->'facility' WHERE jsonb_typeof(d.d->'facility') = 'object'
               UNION ALL
               SELECT v FROM jsonb_array_elements(CASE WHEN jsonb_typeof(d.d->'facilities') = 'array' THEN d.d->'facilities' ELSE '[]' END) v
                WHERE jsonb_typeof(v) = 'object') AS snaps) s
        ) f
       WHERE f.position = ev.position;
    `,
  },
];
