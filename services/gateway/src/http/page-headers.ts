/**
 * The headers of every page and asset the gateway serves to browsers (the API reference at /docs
 * and the customer portal at /portal): no type sniffing, no referrer, no cross-origin opener or
 * embedding of the resources.
 */
export const PAGE_SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
} as const;
