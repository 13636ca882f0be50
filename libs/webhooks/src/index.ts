// Signing and verification live in the dependency-free @fcd/webhook-verify package.

export * from '@fcd/webhook-verify';
export * from './deliveries/index';
export * from './event-log';
export * from './migrations';
// The I/O-free part (field declarations, lists, matching, limits, URL policy…); the event types
// are the contract's (@fcd/events), re-exported there for the webhook API's validation.
export * from './pure';
export * from './recovery';
export * from './recovery-rate';
export * from './store';
export * from './url-safety';
