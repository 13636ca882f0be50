import { describe, expect, expectTypeOf, it } from 'vitest';
import { createClient } from './client.js';
import { FcdApiError, RateLimitError, ServiceUnavailableError, UNEXPECTED_RESPONSE } from './errors.js';

const BASE = 'http://api.test';
const KEY = 'fcd_0123456789abcdefghijklmnopqrstuv';
const NOW = Date.parse('2026-11-25T12:00:00.000Z');
const RESET = '2026-11-26T00:00:00.000Z';
const limits = (remaining: number) => ({
  'x-ratelimit-limit': '100',
  'x-ratelimit-remaining': String(remaining),
  'x-ratelimit-reset': RESET,
});

interface Sent {
  method: string;
  path: string;
  query: Record<string, string>;
  key: string | null;
  body: string;
}

/** A fake API: `route` answers each request; every request is recorded. */
function fakeApi(route: (sent: Sent, n: number) => { status: number; body?: unknown; headers?: Record<string, string> }) {
  const sent: Sent[] = [];
  const waits: number[] = [];
  const fetch = async (request: Request) => {
    const url = new URL(request.url);
    const entry = {
      method: request.method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      key: request.headers.get('x-api-key'),
      body: await request.text(),
    };
    sent.push(entry);
    const { status, body, headers } = route(entry, sent.length);
    return new Response(body === undefined ? null : typeof body === 'string' ? body : JSON.stringify(body), {
      status,
      headers: {
        'x-request-id': `req_${sent.length}`,
        ...(body === undefined || typeof body === 'string' ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
    });
  };
  const client = createClient({ baseUrl: `${BASE}/`, apiKey: KEY, fetch, sleep: async (ms) => void waits.push(ms), now: () => NOW });
  return { client, sent, waits };
}

const usage = {
  data: {
    account_id: 'acc',
    tier: 'free',
    daily_limit: 100,
    today: { date: '2026-11-25', request_count: 3, remaining: 97, resets_at: RESET },
    billing_period: { start: '2026-11-01', end: '2026-11-30', request_count: 3, days: [] },
  },
};

describe('createClient', () => {
  it('sends the API key to the base URL and returns the typed body with the rate-limit headers', async () => {
    const { client, sent } = fakeApi(() => ({ status: 200, body: usage, headers: limits(97) }));
    expect(client.rateLimit).toBeUndefined();
    const result = await client.GET('/v1/account/usage');
    expectTypeOf(result.data.data.daily_limit).toEqualTypeOf<number>();
    expect(result.data).toEqual(usage);
    expect(result.rateLimit).toEqual({ limit: 100, remaining: 97, reset: new Date(RESET) });
    expect(result.requestId).toBe('req_1');
    expect(client.rateLimit).toEqual(result.rateLimit);
    expect(sent).toEqual([{ method: 'GET', path: '/v1/account/usage', query: {}, key: KEY, body: '' }]);
  });

  it('refuses to be created without an API key', () => {
    expect(() => createClient({ baseUrl: BASE, apiKey: '' })).toThrow(
      new TypeError('createClient: apiKey is required (the X-API-Key of your account)'),
    );
  });

  it('sends path parameters, query parameters and JSON bodies', async () => {
    const { client, sent } = fakeApi((s) => ({ status: s.method === 'POST' ? 201 : 200, body: { data: {} } }));
    await client.GET('/v1/facilities/{facility_id}/violations', {
      params: { path: { facility_id: 'f-1' }, query: { severity: 'significant', limit: 5 } },
    });
    await client.POST('/v1/webhooks', { body: { url: 'https://example.test/hook', events: ['case.new'] } });
    expect(sent.map(({ method, path, query, body }) => [method, path, query, body])).toEqual([
      ['GET', '/v1/facilities/f-1/violations', { severity: 'significant', limit: '5' }, ''],
      ['POST', '/v1/webhooks', {}, '{"url":"https://example.test/hook","events":["case.new"]}'],
    ]);
  });
});

describe('typed errors', () => {
  it('throws FcdApiError with the envelope code, message, details, status and request id', async () => {
    const envelope = { error: { code: 'NOT_FOUND', message: 'Facility not found.', details: { id: 'x' } } };
    const { client } = fakeApi(() => ({ status: 404, body: envelope, headers: limits(90) }));
    const error = await client.GET('/v1/facilities/{facility_id}', { params: { path: { facility_id: 'x' } } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FcdApiError);
    expect(error).not.toBeInstanceOf(RateLimitError);
    const e = error as FcdApiError;
    expectTypeOf(e.code).toExtend<string>();
    expect([e.name, e.status, e.code, e.message, e.details, e.requestId, e.retryAfter]).toEqual([
      'FcdApiError',
      404,
      'NOT_FOUND',
      'Facility not found.',
      { id: 'x' },
      'req_1',
      undefined,
    ]);
    expect(e.rateLimit).toEqual({ limit: 100, remaining: 90, reset: new Date(RESET) });
  });

  it('a 429 whose Retry-After is beyond the cap is thrown at once as RateLimitError with retryAfter', async () => {
    const envelope = {
      error: {
        code: 'RATE_LIMIT_EXCEEDED',
        message: `Daily request limit of 100 requests exceeded. The limit resets at ${RESET}.`,
        details: { limit: 100, remaining: 0, resets_at: RESET },
      },
    };
    const { client, sent, waits } = fakeApi(() => ({ status: 429, body: envelope, headers: { ...limits(0), 'retry-after': '43200' } }));
    const error = (await client.GET('/v1/account/usage').catch((e: unknown) => e)) as RateLimitError;
    expect(error).toBeInstanceOf(RateLimitError);
    expect([error.name, error.status, error.code, error.retryAfter, error.resetsAt]).toEqual([
      'RateLimitError',
      429,
      'RATE_LIMIT_EXCEEDED',
      43_200,
      new Date(RESET),
    ]);
    expect(error.rateLimit?.remaining).toBe(0);
    expect(client.rateLimit?.remaining).toBe(0);
    expect(waits).toEqual([]);
    expect(sent).toHaveLength(1);
  });

  it('retries a 429 with a short Retry-After and returns the success', async () => {
    const { client, sent, waits } = fakeApi((_s, n) =>
      n === 1
        ? { status: 429, body: { error: { code: 'RATE_LIMIT_EXCEEDED', message: 'slow down' } }, headers: { 'retry-after': '2' } }
        : { status: 200, body: usage, headers: limits(96) },
    );
    const result = await client.GET('/v1/account/usage');
    expect(result.data.data.tier).toBe('free');
    expect(waits).toEqual([2000]);
    expect(sent).toHaveLength(2);
  });

  it('retries 503 three times by default, then throws ServiceUnavailableError with retryAfter', async () => {
    const envelope = { error: { code: 'SERVICE_UNAVAILABLE', message: 'The service is temporarily unavailable. Retry shortly.' } };
    const { client, sent, waits } = fakeApi(() => ({ status: 503, body: envelope, headers: { 'retry-after': '1' } }));
    const error = (await client
      .POST('/v1/webhooks', { body: { url: 'https://example.test/h', events: ['case.new'] } })
      .catch((e) => e)) as ServiceUnavailableError;
    expect(error).toBeInstanceOf(ServiceUnavailableError);
    expect([error.status, error.code, error.retryAfter]).toEqual([503, 'SERVICE_UNAVAILABLE', 1]);
    expect(waits).toEqual([1000, 1000, 1000]);
    expect(sent.map((s) => [s.method, s.body])).toEqual(
      Array.from({ length: 4 }, () => ['POST', '{"url":"https://example.test/h","events":["case.new"]}']),
    );
  });

  it('does not retry with retry: false', async () => {
    const sent: string[] = [];
    const client = createClient({
      baseUrl: BASE,
      apiKey: KEY,
      retry: false,
      fetch: async (request) => {
        sent.push(request.url);
        return new Response('{"error":{"code":"SERVICE_UNAVAILABLE","message":"down"}}', { status: 503, headers: { 'retry-after': '1' } });
      },
    });
    await expect(client.GET('/v1/cases')).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryAfter: 1 });
    expect(sent).toEqual([`${BASE}/v1/cases`]);
  });

  it('a body that is not the envelope gives UNEXPECTED_RESPONSE', async () => {
    const { client } = fakeApi(() => ({ status: 502, body: '<html>Bad gateway</html>', headers: { 'content-type': 'text/html' } }));
    const error = (await client.GET('/v1/cases').catch((e) => e)) as FcdApiError;
    expect([error.constructor, error.status, error.code, error.message]).toEqual([FcdApiError, 502, UNEXPECTED_RESPONSE, 'HTTP 502']);
  });
});

describe('pagination', () => {
  // Five facilities in pages of two: cursors c2 and c4, the last page without one.
  const facilities = ['f1', 'f2', 'f3', 'f4', 'f5'].map((id) => ({ id, state: 'TX' }));
  const pageOf = (s: Sent) => {
    const start = s.query.cursor ? Number(s.query.cursor.slice(1)) : 0;
    const data = facilities.slice(start, start + 2);
    const next = start + 2 < facilities.length ? `c${start + 2}` : null;
    return { status: 200, body: { data, pagination: { limit: 2, next_cursor: next, has_more: next !== null } }, headers: limits(50) };
  };

  it('pages: one request per page, following next_cursor, keeping the other parameters', async () => {
    const { client, sent } = fakeApi(pageOf);
    const seen: string[][] = [];
    for await (const page of client.pages('/v1/facilities', { params: { query: { state: 'TX', limit: 2 } } })) {
      expectTypeOf(page.data.pagination.next_cursor).toEqualTypeOf<string | null>();
      seen.push(page.data.data.map((f) => f.id));
      expect(page.rateLimit?.remaining).toBe(50);
    }
    expect(seen).toEqual([['f1', 'f2'], ['f3', 'f4'], ['f5']]);
    expect(sent.map((s) => s.query)).toEqual([
      { state: 'TX', limit: '2' },
      { state: 'TX', limit: '2', cursor: 'c2' },
      { state: 'TX', limit: '2', cursor: 'c4' },
    ]);
  });

  it('items: every element once, in order; pages are fetched only as the loop asks', async () => {
    const { client, sent } = fakeApi(pageOf);
    const ids: string[] = [];
    for await (const facility of client.items('/v1/facilities', { params: { query: { limit: 2 } } })) {
      expectTypeOf(facility.id).toEqualTypeOf<string>();
      ids.push(facility.id);
      if (ids.length === 3) break;
    }
    expect(ids).toEqual(['f1', 'f2', 'f3']);
    expect(sent).toHaveLength(2);
    const all: string[] = [];
    for await (const facility of client.items('/v1/facilities')) all.push(facility.id);
    expect(all).toEqual(['f1', 'f2', 'f3', 'f4', 'f5']);
  });

  it('starts from a given cursor, and an error on a later page is thrown from the loop', async () => {
    const { client, sent } = fakeApi((s) =>
      s.query.cursor === 'c4' ? { status: 400, body: { error: { code: 'VALIDATION_ERROR', message: 'Invalid cursor.' } } } : pageOf(s),
    );
    const ids: string[] = [];
    const walk = async () => {
      for await (const facility of client.items('/v1/facilities', { params: { query: { cursor: 'c2' } } })) ids.push(facility.id);
    };
    await expect(walk()).rejects.toMatchObject({ name: 'FcdApiError', status: 400, code: 'VALIDATION_ERROR', message: 'Invalid cursor.' });
    expect(ids).toEqual(['f3', 'f4']);
    expect(sent.map((s) => s.query.cursor)).toEqual(['c2', 'c4']);
  });

  it('stops with an error when the API answers the same cursor twice', async () => {
    const { client } = fakeApi(() => ({ status: 200, body: { data: [], pagination: { limit: 2, next_cursor: 'same', has_more: true } } }));
    const walk = async () => {
      for await (const _ of client.pages('/v1/cases', { params: { query: { cursor: 'same' } } })) {
        // nothing
      }
    };
    await expect(walk()).rejects.toThrow('pages: /v1/cases answered the same cursor twice');
  });
});
