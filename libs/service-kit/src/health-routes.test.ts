import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { healthRoutes, methodNotAllowed, registerHealthRoutes } from './health-routes';
import { baseFastifyOptions, installHttpConventions } from './http';
import { createLogger } from './logger';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

async function app(register: (app: FastifyInstance) => unknown): Promise<FastifyInstance> {
  const a = Fastify(baseFastifyOptions(createLogger({ service: 'health-test', level: 'silent' })));
  installHttpConventions(a);
  await register(a);
  apps.push(a);
  return a;
}

const up = async () => undefined;
const down = async () => {
  throw new Error('connect ECONNREFUSED postgres://user:secret@db:5432/x');
};

describe('healthRoutes', () => {
  it('healthz is ok; readyz is ready with each check', async () => {
    const a = await app((a) => a.register(healthRoutes, { checks: { postgres: up, nats: up }, isShuttingDown: () => false }));
    expect((await a.inject({ url: '/healthz' })).json()).toEqual({ data: { status: 'ok' } });
    const res = await a.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { status: 'ready', checks: { postgres: { status: 'up' }, nats: { status: 'up' } } } });
  });

  it('a dependency down is 503 SERVICE_UNAVAILABLE with Retry-After and the checks, the URL redacted', async () => {
    const a = await app((a) => a.register(healthRoutes, { checks: { postgres: down, nats: up }, isShuttingDown: () => false }));
    const res = await a.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json().error.code).toBe('SERVICE_UNAVAILABLE');
    expect(res.json().error.message).toBe('Not ready: postgres unavailable.');
    expect(res.json().error.details.checks).toEqual({
      postgres: { status: 'down', error: 'connect ECONNREFUSED <url>' },
      nats: { status: 'up' },
    });
  });

  it('once shutdown began: 503 with process down beside the checks', async () => {
    const a = await app((a) => a.register(healthRoutes, { checks: { postgres: up }, isShuttingDown: () => true }));
    const res = await a.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json().error.details.checks).toEqual({ postgres: { status: 'up' }, process: { status: 'down', error: 'shutting down' } });
  });

  it('an optional check down is 200 degraded; hideErrors keeps only the states', async () => {
    const a = await app((a) =>
      a.register(healthRoutes, {
        checks: { postgres: up, redis: down },
        optional: ['redis'],
        hideErrors: true,
        isShuttingDown: () => false,
      }),
    );
    const res = await a.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { status: 'degraded', checks: { postgres: { status: 'up' }, redis: { status: 'down' } } } });
  });
});

describe('registerHealthRoutes', () => {
  it('adds the same routes to the app itself, at once', async () => {
    const a = await app((a) => {
      registerHealthRoutes(a, { checks: { postgres: up }, isShuttingDown: () => false });
      expect(a.hasRoute({ method: 'GET', url: '/healthz' })).toBe(true);
      expect(a.hasRoute({ method: 'GET', url: '/readyz' })).toBe(true);
    });
    expect((await a.inject({ url: '/healthz' })).json()).toEqual({ data: { status: 'ok' } });
    expect((await a.inject({ url: '/readyz' })).json()).toEqual({ data: { status: 'ready', checks: { postgres: { status: 'up' } } } });
  });
});

describe('methodNotAllowed', () => {
  it('answers the other methods with 405 and Allow (HEAD with GET)', async () => {
    const a = await app((a) => {
      a.get('/things', async () => ({ data: [] }));
      a.post('/things', async () => ({ data: {} }));
      methodNotAllowed(a, '/things', ['GET', 'POST']);
    });
    const res = await a.inject({ method: 'DELETE', url: '/things' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, POST, HEAD');
    expect(res.json().error).toMatchObject({
      code: 'METHOD_NOT_ALLOWED',
      message: 'This path does not support that method. Allowed: GET, POST, HEAD.',
    });
    expect((await a.inject({ method: 'GET', url: '/things' })).statusCode).toBe(200);
  });

  it('runs `before` first (e.g. authentication answers 401 before a 405)', async () => {
    const a = await app((a) => {
      a.get('/secret', async () => ({ data: {} }));
      methodNotAllowed(a, '/secret', ['GET'], {
        before: async (_req, reply) => {
          await reply.code(401).send({ error: { code: 'UNAUTHORIZED' } });
        },
      });
    });
    expect((await a.inject({ method: 'PUT', url: '/secret' })).statusCode).toBe(401);
  });
});
