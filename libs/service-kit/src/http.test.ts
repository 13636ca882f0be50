import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { baseFastifyOptions, exceedsJsonDepth, installHttpConventions, MAX_JSON_DEPTH, MAX_PARAM_LENGTH } from './http';
import { createLogger } from './logger';
import { createMetrics } from './metrics';

const app = Fastify(baseFastifyOptions(createLogger({ service: 'http-test', level: 'silent' })));

beforeAll(async () => {
  installHttpConventions(app);
  app.post('/v1/things', async (request) => ({ data: request.body }));
  app.get(
    '/v1/list',
    {
      schema: {
        querystring: {
          type: 'object',
          properties: { limit: { type: 'integer', minimum: 1, maximum: 100 }, q: { type: 'string' } },
          additionalProperties: false,
        },
      },
    },
    async (request) => ({ data: request.query }),
  );
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

describe('JSON depth', () => {
  const nested = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;

  it('counts nesting outside strings only', () => {
    expect(exceedsJsonDepth(nested(MAX_JSON_DEPTH))).toBe(false);
    expect(exceedsJsonDepth(nested(MAX_JSON_DEPTH + 1))).toBe(true);
    expect(exceedsJsonDepth(`{"a":"${'['.repeat(1000)}\\"${'{'.repeat(100)}"}`)).toBe(false);
    expect(exceedsJsonDepth(`${'['.repeat(5000)}${']'.repeat(5000)}`)).toBe(true);
  });

  it(`accepts a body nested ${MAX_JSON_DEPTH} deep`, async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/things',
      headers: { 'content-type': 'application/json' },
      payload: nested(MAX_JSON_DEPTH),
    });
    expect(res.statusCode).toBe(200);
  });

  it('answers a 5,000-deep body (30 KB) with 400 BAD_REQUEST', async () => {
    const payload = `{"a":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    const res = await app.inject({ method: 'POST', url: '/v1/things', headers: { 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: { code: 'BAD_REQUEST', message: `The request body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels.` },
    });
  });
});

describe('integer query parameters', () => {
  it.each(['Infinity', '-Infinity', '1e400', '0x10', '1.5', '1e1', ' 5', '5 ', '+5', 'NaN', '1_0'])(
    'refuses limit=%s with 400 VALIDATION_ERROR naming the field',
    async (text) => {
      const res = await app.inject({ method: 'GET', url: `/v1/list?limit=${encodeURIComponent(text)}&nope=1` });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.details.fields).toEqual([
        { field: 'nope', message: 'is not a known query parameter' },
        { field: 'limit', message: 'must be a decimal integer' },
      ]);
    },
  );

  it('accepts decimal text and keeps other parameters as they are', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/list?limit=010&q=0x10' });
    expect(res.json()).toEqual({ data: { limit: 10, q: '0x10' } });
  });

  it("checks a HEAD of the route too, and before the route's own preValidation hooks", async () => {
    const head = await app.inject({ method: 'HEAD', url: '/v1/list?limit=0x10' });
    expect(head.statusCode).toBe(400);
    const seen: unknown[] = [];
    const other = Fastify();
    installHttpConventions(other);
    other.get(
      '/n',
      {
        preValidation: (request, _reply, done) => {
          seen.push((request.query as { n: unknown }).n);
          done();
        },
        schema: { querystring: { type: 'object', properties: { n: { type: 'number' } } } },
      },
      async (request) => ({ data: request.query }),
    );
    expect((await other.inject({ method: 'GET', url: '/n?n=Infinity' })).statusCode).toBe(400);
    expect((await other.inject({ method: 'GET', url: '/n?n=7' })).json()).toEqual({ data: { n: 7 } });
    expect(seen).toEqual([{ text: 'Infinity' }, '7']);
    await other.close();
  });
});

describe('RED metrics', () => {
  it('count each response once under its route pattern, method and status; no route or a refused URL is "unmatched"', async () => {
    const metrics = createMetrics('http-test');
    const red = Fastify(baseFastifyOptions(createLogger({ service: 'http-test', level: 'silent' })));
    installHttpConventions(red, { metrics });
    await red.register(async (scope) => {
      scope.get('/v1/things/:id', async () => ({ data: 1 }));
    });
    await red.ready();
    for (const url of ['/v1/things/a', '/v1/things/b']) expect((await red.inject({ method: 'GET', url })).statusCode).toBe(200);
    expect((await red.inject({ method: 'HEAD', url: '/v1/things/a' })).statusCode).toBe(200);
    expect((await red.inject({ method: 'GET', url: '/v1/nothing' })).statusCode).toBe(404);
    // URLs the router refuses (frameworkErrors, no hooks run) are counted as unmatched too.
    expect((await red.inject({ method: 'GET', url: '/v1/things/%zz' })).statusCode).toBe(400);
    expect((await red.inject({ method: 'DELETE', url: '/v1/things/%E0%A4%A' })).statusCode).toBe(400);
    expect((await red.inject({ method: 'GET', url: `/v1/things/${'x'.repeat(MAX_PARAM_LENGTH + 1)}` })).statusCode).toBe(404);
    const totals = (await metrics.requestsTotal.get()).values.map((v) => ({ ...v.labels, value: v.value }));
    expect(totals).toEqual(
      expect.arrayContaining([
        { route: '/v1/things/:id', method: 'GET', status: '200', value: 2 },
        { route: '/v1/things/:id', method: 'HEAD', status: '200', value: 1 },
        { route: 'unmatched', method: 'GET', status: '404', value: 2 },
        { route: 'unmatched', method: 'GET', status: '400', value: 1 },
        { route: 'unmatched', method: 'DELETE', status: '400', value: 1 },
      ]),
    );
    expect(totals).toHaveLength(5);
    const counts = (await metrics.requestDuration.get()).values.filter((v) => v.metricName === 'fcd_request_duration_seconds_count');
    expect(counts.map((v) => ({ ...v.labels, value: v.value }))).toEqual(totals);
    await red.close();
  });
});

/** A log destination that keeps every line, parsed. */
function capturedLines(): { lines: Array<Record<string, unknown>>; destination: Writable } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { lines, destination };
}

describe('request loggers', () => {
  it('write the same lines as a pino child bound to the request id, and redact as the root does', async () => {
    const { lines, destination } = capturedLines();
    const logged = Fastify(baseFastifyOptions(createLogger({ service: 'lazy-test', level: 'info', destination })));
    installHttpConventions(logged);
    logged.get('/quiet', async () => ({ ok: true }));
    logged.get('/loud', async (request) => {
      request.log.warn({ apiKey: 'fcd_secret', n: 1 }, 'first');
      request.log.child({ extra: 'x' }).info('second');
      request.log.debug('below the level');
      return { level: request.log.level };
    });
    await logged.ready();
    await logged.inject({ method: 'GET', url: '/quiet', headers: { 'x-request-id': 'req-quiet' } });
    const res = await logged.inject({ method: 'GET', url: '/loud', headers: { 'x-request-id': 'req-loud' } });
    await logged.close();
    expect(res.json()).toEqual({ level: 'info' });
    const mine = lines.filter((l) => l.request_id !== undefined);
    expect(mine.map((l) => [l.request_id, l.level, l.msg])).toEqual([
      ['req-loud', 'warn', 'first'],
      ['req-loud', 'info', 'second'],
    ]);
    expect(mine[0]).toMatchObject({ service: 'lazy-test', apiKey: '[redacted]', n: 1 });
    expect(mine[1]).toMatchObject({ service: 'lazy-test', extra: 'x' });
  });

  it('bind fields in a child without making a pino child until a line is logged', async () => {
    const { lines, destination } = capturedLines();
    const root = createLogger({ service: 'lazy-child', level: 'info', destination });
    const logged = Fastify(baseFastifyOptions(root));
    installHttpConventions(logged);
    let made = 0;
    logged.addHook('onRequest', async (request) => {
      request.log = request.log.child({ account_id: 'acct_1' });
    });
    logged.get('/quiet', async () => ({ ok: true }));
    logged.get('/loud', async (request) => {
      request.log.child({ extra: 'x' }).info('bound twice');
      return { ok: true };
    });
    await logged.ready();
    // Counted from here: the app's own loggers are made at start-up.
    // On the root's `child`, which pino's children inherit: each call keeps its own `this`.
    const child = root.child;
    vi.spyOn(root, 'child').mockImplementation(function (this: typeof root, ...args) {
      made++;
      return child.apply(this, args);
    });
    await logged.inject({ method: 'GET', url: '/quiet', headers: { 'x-request-id': 'req-quiet' } });
    expect(made).toBe(0);
    await logged.inject({ method: 'GET', url: '/loud', headers: { 'x-request-id': 'req-loud' } });
    await logged.close();
    // Made when the line is: one pino child per binding (the request id, the account, `extra`).
    expect(made).toBe(3);
    const mine = lines.filter((l) => l.request_id !== undefined);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ request_id: 'req-loud', account_id: 'acct_1', extra: 'x', msg: 'bound twice' });
  });
});
