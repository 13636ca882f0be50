import { describe, expect, it } from 'vitest';
import { auditLog, dailyUsage } from './account.js';
import { createClient } from './client.js';
import { FcdApiError } from './errors.js';

const KEY = 'fcd_0123456789abcdefghijklmnopqrstuv';

function fakeApi(route: (path: string, query: Record<string, string>) => { status: number; body: unknown }) {
  const sent: Array<{ path: string; query: Record<string, string>; key: string | null }> = [];
  const fetch = async (request: Request) => {
    const url = new URL(request.url);
    const query = Object.fromEntries(url.searchParams);
    sent.push({ path: url.pathname, query, key: request.headers.get('x-api-key') });
    const { status, body } = route(url.pathname, query);
    return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  };
  return { client: createClient({ baseUrl: 'http://api.test', apiKey: KEY, fetch, retry: false }), sent };
}

const entry = (n: number) => ({
  id: `aud_${n}`,
  actor: { type: 'operator' },
  action: 'key.created',
  key_id: `key_${n}`,
  details: { name: `k${n}` },
  occurred_at: '2026-11-25T12:00:00.000Z',
});

describe('account history helpers', () => {
  it('auditLog walks every page of the audit log, newest first, a request per page', async () => {
    const { client, sent } = fakeApi((_path, query) =>
      query.cursor === undefined
        ? { status: 200, body: { data: [entry(3), entry(2)], pagination: { limit: 2, next_cursor: 'c1', has_more: true } } }
        : { status: 200, body: { data: [entry(1)], pagination: { limit: 2, next_cursor: null, has_more: false } } },
    );
    const ids: string[] = [];
    for await (const e of auditLog(client, { limit: 2 })) ids.push(e.id);
    expect(ids).toEqual(['aud_3', 'aud_2', 'aud_1']);
    expect(sent).toEqual([
      { path: '/v1/account/audit-log', query: { limit: '2' }, key: KEY },
      { path: '/v1/account/audit-log', query: { limit: '2', cursor: 'c1' }, key: KEY },
    ]);
  });

  it('dailyUsage answers the range, and throws the API error for a bad one', async () => {
    const range = { from: '2026-11-24', to: '2026-11-25', days: [{ date: '2026-11-24', requests: 3, included: 100, overage: 0 }] };
    const { client, sent } = fakeApi((_path, query) =>
      query.from === '2020-01-01'
        ? {
            status: 400,
            body: { error: { code: 'VALIDATION_ERROR', message: 'Invalid from.', details: { fields: [{ field: 'from', message: 'x' }] } } },
          }
        : { status: 200, body: { data: range } },
    );
    expect((await dailyUsage(client, { from: '2026-11-24', to: '2026-11-25' })).data).toEqual(range);
    expect(sent[0]).toEqual({ path: '/v1/account/usage/daily', query: { from: '2026-11-24', to: '2026-11-25' }, key: KEY });
    const err = await dailyUsage(client, { from: '2020-01-01' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FcdApiError);
    expect((err as FcdApiError).details).toEqual({ fields: [{ field: 'from', message: 'x' }] });
  });
});
