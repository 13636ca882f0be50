import { freePort, testUrls } from '@fcd/testing';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { baseFastifyOptions, createLogger, createPool, installHttpConventions } from '../src/index';

const logger = createLogger({ service: 'db-errors-test', level: 'silent' });
const live = createPool({ connectionString: testUrls.database, applicationName: 'test', logger });
let down: ReturnType<typeof createPool>;

async function app() {
  down = createPool({ connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/test`, applicationName: 'test', logger });
  const a = Fastify(baseFastifyOptions(logger));
  installHttpConventions(a);
  a.get('/echo', async (req) => {
    const { rows } = await live.query<{ v: string }>('SELECT $1::text AS v', [(req.query as { text: string }).text]);
    return { data: rows[0]?.v };
  });
  a.get('/down', async () => {
    await down.query('SELECT 1');
    return { data: 'unreachable' };
  });
  return a;
}

afterAll(async () => {
  await live.end();
  await down?.end();
});

describe('database errors at the HTTP edge (one mapper for every service)', () => {
  it('answers text Postgres cannot store (a NUL byte) with 400 VALIDATION_ERROR, not a 500', async () => {
    const a = await app();
    const ok = await a.inject({ method: 'GET', url: '/echo?text=plain' });
    expect(ok.json()).toEqual({ data: 'plain' });
    const bad = await a.inject({ method: 'GET', url: '/echo?text=a%00b' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('VALIDATION_ERROR');
    await a.close();
  });

  it('answers an unreachable database with 503 SERVICE_UNAVAILABLE and Retry-After', async () => {
    const a = await app();
    const res = await a.inject({ method: 'GET', url: '/down' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json()).toEqual({
      error: {
        code: 'SERVICE_UNAVAILABLE',
        message: 'The service is temporarily unavailable (postgres). Retry after 1 s.',
        details: { dependency: 'postgres' },
      },
    });
    await a.close();
  });
});
