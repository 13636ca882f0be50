/** `@fcd/service-kit/pg`: the Postgres pool, transactions and migrations. */
export * from '../pg';
