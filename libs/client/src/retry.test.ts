import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY, parseRetryAfter, retryDelay, retryingFetch, sleep } from './retry.js';

const NOW = Date.parse('2026-11-25T12:00:00.000Z');
const answer = (status: number, headers: Record<string, string> = {}) =>
  new Response(status === 204 ? null : `{"n":${status}}`, { status, headers });

describe('parseRetryAfter', () => {
  it('reads delta-seconds and HTTP dates, relative to now, never negative', () => {
    expect(parseRetryAfter('120', NOW)).toBe(120_000);
    expect(parseRetryAfter(' 0 ', NOW)).toBe(0);
    expect(parseRetryAfter('Wed, 25 Nov 2026 12:00:30 GMT', NOW)).toBe(30_000);
    expect(parseRetryAfter('Wed, 25 Nov 2026 11:00:00 GMT', NOW)).toBe(0);
  });

  it('gives undefined for a missing or unreadable value', () => {
    expect(parseRetryAfter(null, NOW)).toBeUndefined();
    expect(parseRetryAfter('soon', NOW)).toBeUndefined();
    expect(parseRetryAfter('-5', NOW)).toBeUndefined();
  });
});

describe('retryDelay', () => {
  const policy = { ...DEFAULT_RETRY, maxRetries: 3, maxDelayMs: 10_000, baseDelayMs: 500 };

  it('waits what Retry-After asks on 429 and 503', () => {
    expect(retryDelay(answer(429, { 'retry-after': '2' }), 0, policy, NOW)).toBe(2000);
    expect(retryDelay(answer(503, { 'retry-after': '1' }), 2, policy, NOW)).toBe(1000);
  });

  it('backs off exponentially without Retry-After, capped at maxDelayMs', () => {
    expect([0, 1, 2].map((n) => retryDelay(answer(503), n, policy, NOW))).toEqual([500, 1000, 2000]);
    expect(retryDelay(answer(503), 2, { ...policy, baseDelayMs: 8000 }, NOW)).toBe(10_000);
  });

  it('does not retry other statuses, past maxRetries, or a Retry-After beyond maxDelayMs', () => {
    for (const status of [200, 400, 401, 404, 500, 502]) expect(retryDelay(answer(status), 0, policy, NOW), String(status)).toBeUndefined();
    expect(retryDelay(answer(503, { 'retry-after': '1' }), 3, policy, NOW)).toBeUndefined();
    expect(retryDelay(answer(429, { 'retry-after': '11' }), 0, policy, NOW)).toBeUndefined();
    expect(retryDelay(answer(429, { 'retry-after': '10' }), 0, policy, NOW)).toBe(10_000);
  });

  it('retries only the statuses it is given', () => {
    expect(retryDelay(answer(503), 0, { ...policy, statuses: [429] }, NOW)).toBeUndefined();
    expect(retryDelay(answer(502), 0, { ...policy, statuses: [502] }, NOW)).toBe(500);
  });
});

describe('retryingFetch', () => {
  function scripted(statuses: Array<[number, Record<string, string>?]>) {
    const sent: Array<{ method: string; url: string; body: string }> = [];
    const fetchFn = async (request: Request) => {
      sent.push({ method: request.method, url: request.url, body: await request.text() });
      const [status, headers] = statuses[Math.min(sent.length - 1, statuses.length - 1)] as [number, Record<string, string>?];
      return answer(status, headers);
    };
    return { sent, fetchFn };
  }

  it('retries 503 then 429 as told and returns the first success; the body is sent again each time', async () => {
    const { sent, fetchFn } = scripted([[503, { 'retry-after': '1' }], [503], [429, { 'retry-after': '3' }], [201]]);
    const waits: number[] = [];
    const send = retryingFetch(fetchFn, { sleep: async (ms) => void waits.push(ms), now: () => NOW });
    const response = await send(new Request('http://api.test/v1/webhooks', { method: 'POST', body: '{"url":"x"}' }));
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ n: 201 });
    expect(waits).toEqual([1000, 1000, 3000]);
    expect(sent).toEqual(Array.from({ length: 4 }, () => ({ method: 'POST', url: 'http://api.test/v1/webhooks', body: '{"url":"x"}' })));
  });

  it('gives up after maxRetries and returns the last answer', async () => {
    const { sent, fetchFn } = scripted([[503, { 'retry-after': '0' }]]);
    const waits: number[] = [];
    const send = retryingFetch(fetchFn, { retry: { maxRetries: 2 }, sleep: async (ms) => void waits.push(ms), now: () => NOW });
    const response = await send(new Request('http://api.test/v1/account/usage'));
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ n: 503 });
    expect(waits).toEqual([0, 0]);
    expect(sent).toHaveLength(3);
  });

  it('returns a 429 whose Retry-After exceeds the cap at once, without waiting', async () => {
    const { sent, fetchFn } = scripted([[429, { 'retry-after': '43200' }]]);
    const waits: number[] = [];
    const send = retryingFetch(fetchFn, { sleep: async (ms) => void waits.push(ms), now: () => NOW });
    expect((await send(new Request('http://api.test/v1/facilities'))).status).toBe(429);
    expect(waits).toEqual([]);
    expect(sent).toHaveLength(1);
  });

  it("passes the request's abort signal to the wait, and an abort ends the retries", async () => {
    const { sent, fetchFn } = scripted([[503, { 'retry-after': '5' }]]);
    const controller = new AbortController();
    const signals: Array<AbortSignal | null | undefined> = [];
    const send = retryingFetch(fetchFn, {
      sleep: async (_ms, signal) => {
        signals.push(signal);
        controller.abort(new Error('caller gave up'));
        throw signal?.reason;
      },
      now: () => NOW,
    });
    const request = new Request('http://api.test/v1/cases', { signal: controller.signal });
    await expect(send(request)).rejects.toThrow('caller gave up');
    expect(signals).toEqual([request.signal]);
    expect(sent).toHaveLength(1);
  });
});

describe('sleep', () => {
  it('rejects at once with the reason of an aborted signal', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(sleep(60_000, controller.signal)).rejects.toThrow('stop');
  });
});
