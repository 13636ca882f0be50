import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * Test fixtures for the real services. Each test file isolates itself: its own
 * database, its own Redis key prefix, its own NATS stream and subject names.
 * URLs come from DATABASE_URL, REDIS_URL and NATS_URL (set by scripts/test.sh,
 * or by the vitest global setup, which falls back to testcontainers when they
 * are unset and a Docker engine is available).
 */
export const testUrls = {
  get database(): string {
    return process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  },
  get redis(): string {
    return process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  },
  get nats(): string {
    return process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  },
};

export function uniqueName(label: string): string {
  const clean = label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 30);
  return `${clean}_${randomBytes(4).toString('hex')}`;
}

export interface TestDatabase {
  url: string;
  name: string;
  /** Environment every service and CLI on this database needs besides DATABASE_URL (e.g. DATABASE_POOL_MODE behind PgBouncer). */
  env?: Record<string, string>;
  drop(): Promise<void>;
}

/** Creates a fresh database for one test file; drop() removes it (terminating leftovers). */
export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const name = `t_${uniqueName(label)}`;
  const admin = new pg.Client({ connectionString: testUrls.database });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(testUrls.database);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: testUrls.database });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
