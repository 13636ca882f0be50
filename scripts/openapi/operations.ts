/** The summary, tag, id and description of every documented operation (the OpenAPI document's prose). */

export interface OperationInfo {
  tag: string;
  operationId: string;
  summary: string;
  description?: string;
  /** Error statuses beyond the ones derived from the route's shape. */
  errors?: number[];
  /** Descriptions of this operation's query parameters, where they differ from QUERY_PARAMETERS. */
  query?: Record<string, string>;
}

const EXPORT_DESCRIPTION =
  'Pro tier and above (Free: 403). Streams every matching row in `id` order, NDJSON by default (one representation per line, then a last line `{"export":{"complete":true,"rows":N,"after":null}}`) or CSV with `Accept: text/csv` (a header row, RFC 4180 quoting, arrays joined with `;`). **Counted as one request per 1,000 rows** (at least one; 50,000 rows = 50 requests), each page counted before it is sent. If the export stops early, the NDJSON ends with `{"export":{"complete":false,"rows":N,"after":"<id>","error":{…}}}` and a CSV response is cut; either way `after=<id of the last row received>` resumes with no gap and no duplicate. At most 2 exports of an account at once (4 on Enterprise; the next is 429 CONCURRENCY_LIMIT_EXCEEDED with `Retry-After`). A reader that takes nothing for 30 s is cut: the rest of the page and the resume line (error REQUEST_TIMEOUT) are queued, and the connection is closed 5 s later if it is not read. Not conditional (no ETag).';

export const OPERATIONS: Record<string, OperationInfo> = {
  'GET /healthz': { tag: 'Health', operationId: 'getHealth', summary: 'Liveness: the process serves' },
  'GET /readyz': {
    tag: 'Health',
    operationId: 'getReadiness',
    summary: 'Readiness: every dependency answers',
    description:
      'Checks the usage service, Postgres, Redis and the facility and webhook services. 503 SERVICE_UNAVAILABLE with `error.details.checks` naming each dependency and its state when one is down.',
  },
  'GET /v1/account/usage': {
    tag: 'Account',
    operationId: 'getAccountUsage',
    summary: "The calling account's usage today and in the billing period",
    description:
      'The call itself counts, and the figures include it. The billing period is the UTC calendar month. While the usage store (Postgres) is unreachable, an account the service knows is still answered: today is live, earlier days come from its cache, and the response carries `X-Usage-Stale: true`.',
  },
  'GET /v1/account/keys': {
    tag: 'Account',
    operationId: 'listAccountKeys',
    summary: "The calling account's API keys, oldest first",
    description:
      'Every key of the account, revoked and expired ones included, with its `prefix` (first 8 characters) but never the key itself. `last_used_at` may lag by up to a minute. Counted like any request.',
  },
  'POST /v1/account/keys': {
    tag: 'Account',
    operationId: 'createAccountKey',
    summary: 'Create an API key',
    description:
      'Returns the key in clear (`key`): the only time it is shown. At most 10 live keys per account (a key is live until revoked or past its `expires_at`); the 11th is 409 LIMIT_REACHED with `details.limit`. All keys of an account share its one daily limit.',
  },
  'PATCH /v1/account/keys/:key_id': {
    tag: 'Account',
    operationId: 'renameAccountKey',
    summary: 'Rename an API key',
  },
  'DELETE /v1/account/keys/:key_id': {
    tag: 'Account',
    operationId: 'revokeAccountKey',
    summary: 'Revoke an API key',
    description:
      'The key gets 401 on every gateway within 5 s. Revoking an already revoked key is a 204 and changes nothing. The last live key of the account cannot be revoked: 409 LIMIT_REACHED (create another first).',
    errors: [409],
  },
  'POST /v1/account/keys/:key_id/roll': {
    tag: 'Account',
    operationId: 'rollAccountKey',
    summary: 'Roll an API key: a new key, the old one working a while longer',
    description:
      'Creates a new key with the same name and expiry and returns it in clear (`key`, shown once), with the old key as `previous`. The old key keeps working for `expires_in_seconds` (0 to 604800, 7 days) and then gets 401; 0 revokes it at once. Never refused for the 10-key limit (the old key counts as live until it lapses). A revoked or expired key is 404.',
  },
  'GET /v1/account/audit-log': {
    tag: 'Account',
    operationId: 'listAccountAuditLog',
    summary: "The calling account's audit log of key changes, newest first",
    description:
      'One entry per change of the account\'s API keys (`key.created`, `key.renamed`, `key.revoked`, `key.rolled`), written in the change\'s own transaction: who made it (`actor`: `{ type: "key", key_id }` for the account through one of its keys, `{ type: "operator" }`; more types may come), which key, what changed (`details`, never a key) and when. Each account sees its own entries only. Counted like any request.',
  },
  'GET /v1/account/usage/daily': {
    tag: 'Account',
    operationId: 'getAccountDailyUsage',
    summary: "The calling account's requests and overage per UTC day",
    description:
      "Every UTC day from `from` to `to` (both included, at most 400 days; by default the 30 days ending today), oldest first, a day without requests with 0: its `requests`, its `included` requests (the daily limit) and its `overage` (requests over the limit on a tier billed for overage; 0 on Free). The same figures as the billing period of `GET /v1/account/usage`: a month's days add up to them. Today's count is live and includes this request. `from` after `to`, a longer range, a `to` after today or an impossible date is a VALIDATION_ERROR naming the parameter. Counted like any request.",
  },
  'GET /v1/account/statements': {
    tag: 'Account',
    operationId: 'listAccountStatements',
    summary: "The calling account's closed monthly statements, newest first",
    description:
      'One statement per closed UTC month: the tiers in force and their days, total, included and overage requests, the rate and the amount in USD (exact decimal strings), and any late corrections as `adjustments` (a statement never changes). The current month is not there until it is closed (on the 1st). Counted like any request.',
  },
  'GET /v1/facilities': {
    tag: 'Facilities',
    operationId: 'listFacilities',
    summary: 'List facilities',
    description:
      'Filters combine with AND: place (`state`, `city`, `county`, `zip`, `epa_region`, `bbox`), industry (`naics`, `sic`), `major`, compliance (`compliance_status`, `min_quarters_nc`, `snc`), penalties and inspections (`min_penalties_usd`, `penalized_since`, `inspected_since`, `not_inspected_since`), and `updated_since` for incremental sync; a bad value is a VALIDATION_ERROR naming the parameter. `sort` orders by `name`, `-penalties_total`, `-quarters_nc`, `last_inspection` or `distance` (with `near`); facilities without a value come last, and each order has its own cursor. `state` and `program` are case-insensitive; `q` matches names containing it. With `near` and `radius_km`: the facilities within the radius, nearest first, each with `distance_km`; a bad coordinate or radius is a VALIDATION_ERROR naming `near` or `radius_km`.',
  },
  'GET /v1/facilities/:facility_id': { tag: 'Facilities', operationId: 'getFacility', summary: 'Get one facility' },
  'GET /v1/facilities/:facility_id/violations': {
    tag: 'Facilities',
    operationId: 'listFacilityViolations',
    summary: "List a facility's violations",
  },
  'GET /v1/facilities/:facility_id/cases': {
    tag: 'Facilities',
    operationId: 'listFacilityCases',
    summary: 'List the enforcement cases involving a facility',
  },
  'GET /v1/violations': { tag: 'Violations', operationId: 'listViolations', summary: 'List violations' },
  'GET /v1/cases': { tag: 'Cases', operationId: 'listCases', summary: 'List enforcement cases' },
  'GET /v1/cases/:case_id': { tag: 'Cases', operationId: 'getCase', summary: 'Get one enforcement case' },
  'GET /v1/sources': {
    tag: 'Sources',
    operationId: 'listSources',
    summary: 'The EPA ECHO files the data comes from, and when each was synced',
    description:
      'Every tier; counted like any request. One entry per ECHO file a sync has applied, by `name`: the latest sync that applied it, the file\'s own date (`file_date`, the zip entry\'s timestamp), when it was synced (`synced_at`), and its `rows` and `rejected_rows`. A file whose unit a sync refused (a bad header) keeps the entry of the last sync that applied it. Not paginated: at most one entry per file the importer reads (docs/echo.md). Before any ECHO sync (demo or imported data) the list is empty. How often EPA refreshes each file: docs/echo.md, "Freshness".',
  },
  'GET /v1/exports/facilities': {
    tag: 'Exports',
    operationId: 'exportFacilities',
    summary: 'Export every facility matching the filters (NDJSON or CSV)',
    description: EXPORT_DESCRIPTION,
  },
  'GET /v1/exports/violations': {
    tag: 'Exports',
    operationId: 'exportViolations',
    summary: 'Export every violation matching the filters (NDJSON or CSV)',
    description: `${EXPORT_DESCRIPTION} \`state\` is the facility's state.`,
  },
  'GET /v1/exports/cases': {
    tag: 'Exports',
    operationId: 'exportCases',
    summary: 'Export every enforcement case matching the filters (NDJSON or CSV)',
    description: EXPORT_DESCRIPTION,
  },
  'POST /v1/webhooks': {
    tag: 'Webhooks',
    operationId: 'createWebhook',
    summary: 'Create a webhook subscription',
    description:
      'Returns the subscription with its signing secret in clear: the only time it is shown. At most 25 subscriptions per account (409 LIMIT_REACHED). `facility_ids` omitted or null watches every facility.',
  },
  'GET /v1/webhooks': {
    tag: 'Webhooks',
    operationId: 'listWebhooks',
    summary: "List the account's webhook subscriptions, newest first",
  },
  'GET /v1/webhooks/:webhook_id': {
    tag: 'Webhooks',
    operationId: 'getWebhook',
    summary: 'Get one webhook subscription (secret redacted)',
  },
  'PATCH /v1/webhooks/:webhook_id': {
    tag: 'Webhooks',
    operationId: 'updateWebhook',
    summary: 'Update url, events, facility_ids or is_active',
    description: 'Any non-empty subset of the fields. `is_active: true` reactivates a subscription and resets its failure count.',
  },
  'DELETE /v1/webhooks/:webhook_id': {
    tag: 'Webhooks',
    operationId: 'deleteWebhook',
    summary: 'Delete a webhook subscription',
    description: 'Nothing more is delivered to it.',
  },
  'GET /v1/webhooks/:webhook_id/deliveries': {
    tag: 'Webhooks',
    operationId: 'listWebhookDeliveries',
    summary: "A subscription's delivery log, newest first",
    description: 'Each delivery with its status, next attempt time and every attempt (response status, latency, error).',
  },
  'POST /v1/webhooks/:webhook_id/deliveries/:delivery_id/retry': {
    tag: 'Webhooks',
    operationId: 'retryWebhookDelivery',
    summary: 'Attempt a finished delivery once more, now',
    description:
      'No automatic retries follow and it never deactivates the subscription. A pending delivery is already scheduled and is returned as it is. An inactive subscription is a VALIDATION_ERROR.',
    errors: [400],
  },
  'POST /v1/webhooks/:webhook_id/test': {
    tag: 'Webhooks',
    operationId: 'testWebhook',
    summary: 'Send a signed `webhook.test` event (one attempt)',
    description: 'An inactive subscription is a VALIDATION_ERROR.',
    errors: [400],
  },
  'POST /v1/webhooks/:webhook_id/rotate-secret': {
    tag: 'Webhooks',
    operationId: 'rotateWebhookSecret',
    summary: 'Replace the signing secret',
    description: 'The new secret is effective for every attempt from now on and is returned in clear this once.',
  },
  'POST /v1/webhooks/:webhook_id/recover': {
    tag: 'Webhooks',
    operationId: 'recoverWebhookEvents',
    summary: 'Re-deliver the events of a window that the subscription did not receive',
    description:
      "Enqueues, as new deliveries with the normal retry rules, every event created in [`since`, `until`) (default until: now) that the subscription matches and did not receive successfully (no delivery of it succeeded and none is pending); `events` is how many. The window starts no earlier than the subscription's `created_at`. At most 10,000 events per call, oldest first: `next_since` is where the next call starts (null: the window is done). The deliveries are paced at the subscription's `rate_limit_per_second` (10/s without one). `since` must lie within the event retention (30 days by default, at least 7), else VALIDATION_ERROR; impossible dates (`2026-02-29`, `T24:00`) are refused as by GET /v1/events. `dry_run: true` counts and sends nothing. An inactive subscription is a VALIDATION_ERROR (reactivate it first). 409 LIMIT_REACHED (`Retry-After`) while a recovery of the subscription is in progress (running, or its deliveries still pending); 429 RATE_LIMIT_EXCEEDED (`Retry-After`) beyond 10 recover calls per minute per account.",
  },
  'GET /v1/events': {
    tag: 'Events',
    operationId: 'listEvents',
    summary: 'The event log, oldest first (polling alternative to webhooks)',
    // subscription_id: another account's or an unknown subscription.
    errors: [404],
    description:
      'The envelopes webhooks carry, byte for byte, in the order the log recorded them. Every tier; counted like any request. To poll, keep calling with the last `pagination.next_cursor`: it is set whenever the page has events, also on the last page, so each event is seen exactly once; an empty page returns the cursor it was given. Events are kept for the retention period (30 days by default).',
    query: {
      type: 'Only events of this type.',
      facility_id: 'Only events concerning this facility (UUID): a violation of it, a case involving it, a change of its status.',
      since: 'Only events created at or after this time (RFC 3339 date-time).',
      cursor: 'Opaque cursor: `pagination.next_cursor` of the previous page.',
    },
  },
  'GET /v1/events/:event_id': {
    tag: 'Events',
    operationId: 'getEvent',
    summary: 'Get one event envelope',
    description: 'Every tier. An event past the retention period is 404 NOT_FOUND.',
  },
};
