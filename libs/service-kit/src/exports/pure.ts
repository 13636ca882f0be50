/**
 * `@fcd/service-kit/pure`: what a service's domain/ may import. Nothing here loads a driver, a
 * server or a logger (pg, ioredis, NATS, Fastify, undici, pino, prom-client):
 * scripts/repo/layering.test.ts checks it for every domain/ file, transitively.
 */
export * from '../api-keys';
export * from '../backoff';
export * from '../clock';
export * from '../cursor';
export * from '../errors';
export * from '../health';
export * from '../ids';
export * from '../internal-auth';
export * from '../pagination';
export * from '../retry';
export * from '../schemas';
export * from '../wakeable-sleep';
export * from '../worker';
