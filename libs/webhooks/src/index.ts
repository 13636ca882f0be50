// Signing and verification live in the dependency-free @fcd/webhook-verify package.

// The event types are the contract's (@fcd/events); re-exported for the webhook API's validation.
export { EVENT_TYPES, type EventType, isEventType } from '@fcd/events';
export * from '@fcd/webhook-verify';
export * from './deliveries/index';
export * from './event-log';
export * from './event-record';
export * from './fields';
export * from './limits';
export * from './lists';
export * from './matching';
export * from './migrations';
export * from './recovery';
export * from './recovery-rate';
export * from './secrets';
export * from './store';
export * from './subscription';
export * from './url-safety';
