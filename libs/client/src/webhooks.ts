/**
 * `@fcd/client/webhooks`: signing and verification of webhook deliveries, re-exported from the
 * dependency-free `@fcd/webhook-verify` (which can also be installed, or copied, on its own).
 */
export * from '@fcd/webhook-verify';
