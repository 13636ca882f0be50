/**
 * The public API surface of /v1: every route, its methods and which service
 * answers it. Unknown /v1 paths are 404 and known paths with another method
 * are 405 (with Allow) — both after authentication, so they are counted.
 */
export type Target = 'local' | 'facility' | 'webhook';

export interface PublicRoute {
  path: string;
  methods: Array<'GET' | 'POST' | 'PATCH' | 'DELETE'>;
  target: Target;
  /**
   * Cache-Control max-age of the route's 200 answers to GET (always `private`: one account's view).
   * Compliance data changes only when an import does; an account's own webhooks and usage change
   * with its own calls, so clients revalidate those every time (a 304 costs nothing).
   */
  maxAgeSeconds?: number;
}

/** Facility data: imports run at most a few times a day; a minute of staleness is harmless. */
const DATA_MAX_AGE = 60;

export const PUBLIC_ROUTES: PublicRoute[] = [
  { path: '/v1/account/usage', methods: ['GET'], target: 'local', maxAgeSeconds: 0 },
  // The account's usage per day and its audit log of key changes (every tier; the usage service answers).
  { path: '/v1/account/usage/daily', methods: ['GET'], target: 'local', maxAgeSeconds: 0 },
  { path: '/v1/account/audit-log', methods: ['GET'], target: 'local', maxAgeSeconds: 0 },
  // The account's own API keys (every tier; answered with the usage service over gRPC).
  { path: '/v1/account/keys', methods: ['GET', 'POST'], target: 'local', maxAgeSeconds: 0 },
  { path: '/v1/account/keys/:key_id', methods: ['PATCH', 'DELETE'], target: 'local' },
  { path: '/v1/account/keys/:key_id/roll', methods: ['POST'], target: 'local' },
  // The account's closed monthly statements (answered with the usage service's BillingService).
  { path: '/v1/account/statements', methods: ['GET'], target: 'local', maxAgeSeconds: 0 },
  { path: '/v1/facilities', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  { path: '/v1/facilities/:facility_id', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  { path: '/v1/facilities/:facility_id/violations', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  { path: '/v1/facilities/:facility_id/cases', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  { path: '/v1/violations', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  { path: '/v1/cases', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  { path: '/v1/cases/:case_id', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  // Freshness: the ECHO files the syncs applied (every tier, counted like any read).
  { path: '/v1/sources', methods: ['GET'], target: 'facility', maxAgeSeconds: DATA_MAX_AGE },
  { path: '/v1/webhooks', methods: ['GET', 'POST'], target: 'webhook', maxAgeSeconds: 0 },
  { path: '/v1/webhooks/:webhook_id', methods: ['GET', 'PATCH', 'DELETE'], target: 'webhook', maxAgeSeconds: 0 },
  { path: '/v1/webhooks/:webhook_id/deliveries', methods: ['GET'], target: 'webhook', maxAgeSeconds: 0 },
  { path: '/v1/webhooks/:webhook_id/deliveries/:delivery_id/retry', methods: ['POST'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id/test', methods: ['POST'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id/rotate-secret', methods: ['POST'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id/recover', methods: ['POST'], target: 'webhook' },
  { path: '/v1/events', methods: ['GET'], target: 'webhook' },
  { path: '/v1/events/:event_id', methods: ['GET'], target: 'webhook' },
  // Bulk exports: the gateway walks the facility service's export pages and counts each (docs/metering.md).
  { path: '/v1/exports/facilities', methods: ['GET'], target: 'local' },
  { path: '/v1/exports/violations', methods: ['GET'], target: 'local' },
  { path: '/v1/exports/cases', methods: ['GET'], target: 'local' },
];

export const EXPORT_KINDS = ['facilities', 'violations', 'cases'] as const;

/** Rows per export page, and so per counted request (docs/metering.md, "Exports"). */
export const EXPORT_PAGE_ROWS = 1000;

/**
 * Paths under these prefixes need at least this tier rank ("Pro and above": free 0 < pro 1 <
 * enterprise 2). The gateway refuses lower tiers with 403 before reading the body, on every path
 * and method under the prefix (unknown sub-paths and wrong methods too), matched against the route
 * the router matched or else the canonical path, never the raw request target (auth/metering.ts);
 * the domain service checks again (the webhook service on every route, the facility service on its
 * export pages).
 */
export const TIER_GATED_PREFIXES = [
  { prefix: '/v1/webhooks', minTierRank: 1, requiredTier: 'pro', feature: 'Webhooks' },
  { prefix: '/v1/exports', minTierRank: 1, requiredTier: 'pro', feature: 'Bulk exports' },
] as const;

export const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** Cache-Control max-age of a route's GET answers (0 for a GET route the table does not name). */
export function maxAgeOf(routePath: string | undefined): number {
  return PUBLIC_ROUTES.find((r) => r.path === routePath)?.maxAgeSeconds ?? 0;
}
