/**
 * Everything of the service kit. A domain/ file imports `@fcd/service-kit/pure` instead (no I/O
 * module loaded); the other subpaths are `http`, `pg`, `redis` and `runtime`.
 */
export * from './exports/http';
export * from './exports/pg';
export * from './exports/pure';
export * from './exports/redis';
export * from './exports/runtime';
