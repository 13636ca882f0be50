import { describe, expect, it } from 'vitest';
import { createClient } from './client.js';
import { FcdApiError } from './errors.js';
import { listStatements } from './statements.js';

const KEY = 'fcd_0123456789abcdefghijklmnopqrstuv';

const statement = {
  period: '2026-10',
  tiers: [
    {
      tier: 'pro',
      days: 10,
      daily_limit: 25000,
      included_requests: 250000,
      overage_requests: 5001,
      overage_rate_usd: '0.003',
      amount_usd: '15.003',
    },
    {
      tier: 'free',
      days: 21,
      daily_limit: 100,
      included_requests: 2100,
      overage_requests: 0,
      overage_rate_usd: '0.000',
      amount_usd: '0.000',
    },
  ],
  total_requests: 55141,
  included_requests: 252100,
  overage_requests: 5001,
  overage_rate_usd: '0.000',
  amount_usd: '15.003',
  closed_at: '2026-11-01T00:30:02.000Z',
  adjustments: [],
};

function fakeApi(status: number, body: unknown) {
  const sent: Array<{ path: string; key: string | null }> = [];
  const fetch = async (request: Request) => {
    sent.push({ path: new URL(request.url).pathname, key: request.headers.get('x-api-key') });
    return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  };
  return { client: createClient({ baseUrl: 'http://api.test', apiKey: KEY, fetch, retry: false }), sent };
}

describe('listStatements', () => {
  it('answers the account statements, amounts as the exact decimal strings sent', async () => {
    const { client, sent } = fakeApi(200, { data: [statement] });
    const { data } = await listStatements(client);
    expect(data).toEqual([statement]);
    expect(sent).toEqual([{ path: '/v1/account/statements', key: KEY }]);
  });

  it('throws the API error of a refused call', async () => {
    const { client } = fakeApi(503, { error: { code: 'SERVICE_UNAVAILABLE', message: 'The service is temporarily unavailable (usage).' } });
    await expect(listStatements(client)).rejects.toBeInstanceOf(FcdApiError);
  });
});
