/**
 * `@fcd/webhooks/pure`: what a service's domain/ may import from the webhook library. Nothing
 * here does I/O or loads a driver (pg, ioredis, NATS, Fastify, undici): the resources' field
 * declarations and views, the lists, matching, limits, the delivery bookkeeping rules, secrets'
 * format, and the URL policy (its DNS is the caller's resolver). scripts/repo/layering.test.ts
 * checks every domain/ file that imports it, transitively. The SQL and node:dns are in the main
 * entry (`@fcd/webhooks`), which also exports all of this.
 */
export { EVENT_TYPES, type EventType, isEventType } from '@fcd/events/contract';
export * from './deliveries/bookkeeping';
export * from './deliveries/envelope';
export * from './deliveries/redact';
export * from './deliveries/types';
export * from './deliveries/view';
export * from './event-record';
export * from './fields';
export * from './filter';
export * from './limits';
export * from './lists';
export * from './matching';
export * from './recovery-rate-rule';
export * from './secrets';
export * from './subscription';
export * from './url-policy';
