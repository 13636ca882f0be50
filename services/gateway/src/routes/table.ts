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
}

export const PUBLIC_ROUTES: PublicRoute[] = [
  { path: '/v1/account/usage', methods: ['GET'], target: 'local' },
  { path: '/v1/facilities', methods: ['GET'], target: 'facility' },
  { path: '/v1/facilities/:facility_id', methods: ['GET'], target: 'facility' },
  { path: '/v1/facilities/:facility_id/violations', methods: ['GET'], target: 'facility' },
  { path: '/v1/facilities/:facility_id/cases', methods: ['GET'], target: 'facility' },
  { path: '/v1/violations', methods: ['GET'], target: 'facility' },
  { path: '/v1/cases', methods: ['GET'], target: 'facility' },
  { path: '/v1/cases/:case_id', methods: ['GET'], target: 'facility' },
  { path: '/v1/webhooks', methods: ['GET', 'POST'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id', methods: ['GET', 'PATCH', 'DELETE'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id/deliveries', methods: ['GET'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id/deliveries/:delivery_id/retry', methods: ['POST'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id/test', methods: ['POST'], target: 'webhook' },
  { path: '/v1/webhooks/:webhook_id/rotate-secret', methods: ['POST'], target: 'webhook' },
];

/**
 * Paths under these prefixes need at least this tier rank ("Pro and above": free 0 < pro 1 <
 * enterprise 2). The gateway refuses lower tiers with 403 before reading the body, on every path
 * and method under the prefix (unknown sub-paths and wrong methods too); the domain service checks again.
 */
export const TIER_GATED_PREFIXES = [{ prefix: '/v1/webhooks', minTierRank: 1, requiredTier: 'pro' }] as const;

export const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
