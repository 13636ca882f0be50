import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseFastifyOptions, installHttpConventions, MAX_PARAM_LENGTH } from './http';
import { createLogger } from './logger';

const app = Fastify(baseFastifyOptions(createLogger({ service: 'http-test', level: 'silent' })));

beforeAll(async () => {
  installHttpConventions(app);
  app.post('/v1/things', async (request) => ({ data: request.body }));
  app.get<{ Params: { id: string } }>('/v1/things/:id', async (request) => ({ data: { length: request.params.id.length } }));
  await app.ready();
});
afterAll(() => app.close());

describe('URLs the router cannot take still get the error envelope and a request id', () => {
  it('routes a path parameter up to the documented length', async () => {
    const res = await app.inject({ method: 'GET', url: `/v1/things/${'x'.repeat(MAX_PARAM_LENGTH)}` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { length: MAX_PARAM_LENGTH } });
  });

  it('answers a longer path parameter with 404 NOT_FOUND, without echoing the path', async () => {
    const res = await app.inject({
      method: 'GET',
      url: `/v1/things/${'x'.repeat(MAX_PARAM_LENGTH + 1)}`,
      headers: { 'x-request-id': 'req-long' },
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-request-id']).toBe('req-long');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'No such resource.' } });
  });

  it.each(['/v1/things/%zz', '/v1/things/%E0%A4%A'])(
    'answers %s (percent-encoding that does not decode) with 400 BAD_REQUEST',
    async (url) => {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(400);
      expect(res.headers['x-request-id']).toMatch(/^req_[0-9a-f-]{36}$/);
      expect(res.json()).toEqual({
        error: { code: 'BAD_REQUEST', message: 'The request URL is not valid: a percent-encoded sequence does not decode.' },
      });
    },
  );
});

describe('JSON bodies', () => {
  it.each([
    ['{"a":', 'The request body is not valid JSON.'],
    ['[1]', 'The request body must be a JSON object.'],
    ['{"__proto__":{"admin":true}}', 'The request body must not contain "__proto__" or "constructor.prototype" keys.'],
    ['{"constructor":{"prototype":{"admin":true}}}', 'The request body must not contain "__proto__" or "constructor.prototype" keys.'],
  ])('answers %s with 400 BAD_REQUEST: %s', async (payload, message) => {
    const res = await app.inject({ method: 'POST', url: '/v1/things', headers: { 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: { code: 'BAD_REQUEST', message } });
  });

  it('accepts an ordinary object', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/things',
      headers: { 'content-type': 'application/json' },
      payload: '{"a":1}',
    });
    expect(res.json()).toEqual({ data: { a: 1 } });
  });
});
