import { describe, expect, it } from 'vitest';
import type { StoredStatement } from '../store/statements';
import { renderStatements } from './export';

const statement: StoredStatement = {
  accountId: 'acct_1',
  period: '2026-10',
  tiers: [
    {
      tier: 'pro',
      days: 10,
      dailyLimit: 25_000,
      includedRequests: 250_000,
      overageRequests: 5_001,
      overageRateUsd: '0.003',
      amountUsd: '15.003',
    },
    {
      tier: 'free, legacy',
      days: 21,
      dailyLimit: 100,
      includedRequests: 2_100,
      overageRequests: 0,
      overageRateUsd: '0.000',
      amountUsd: '0.000',
    },
  ],
  totalRequests: 55_141,
  includedRequests: 252_100,
  overageRequests: 5_001,
  overageRateUsd: '0.000',
  amountUsd: '15.003',
  amountMicroUsd: 15_003_000n,
  closedAt: '2026-11-01T00:30:00.000Z',
  adjustments: [
    {
      totalRequests: 3,
      includedRequests: 0,
      overageRequests: 3,
      amountUsd: '0.009',
      amountMicroUsd: 9_000n,
      createdAt: '2026-11-03T01:00:00.000Z',
    },
  ],
};

describe('statement exports', () => {
  it('writes fixed CSV columns: a statement row, then a row per adjustment, RFC 4180 quoting and CRLF', () => {
    expect(renderStatements([statement], 'csv')).toBe(
      [
        'kind,account_id,period,tiers,total_requests,included_requests,overage_requests,overage_rate_usd,amount_usd,at',
        'statement,acct_1,2026-10,"pro:10;free, legacy:21",55141,252100,5001,0.000,15.003,2026-11-01T00:30:00.000Z',
        'adjustment,acct_1,2026-10,,3,0,3,,0.009,2026-11-03T01:00:00.000Z',
        '',
      ].join('\r\n'),
    );
    expect(renderStatements([], 'csv')).toBe(
      'kind,account_id,period,tiers,total_requests,included_requests,overage_requests,overage_rate_usd,amount_usd,at\r\n',
    );
  });

  it('writes one JSON line per account and period, the same view as the JSON list', () => {
    const lines = renderStatements([statement, { ...statement, accountId: 'acct_2', adjustments: [] }], 'jsonl').split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe('');
    const json = JSON.parse(renderStatements([statement], 'json')) as { data: unknown[] };
    expect(JSON.parse(lines[0] as string)).toEqual(json.data[0]);
    expect(json.data[0]).toMatchObject({
      account_id: 'acct_1',
      amount_usd: '15.003',
      tiers: [
        { tier: 'pro', days: 10, included_requests: 250_000 },
        { tier: 'free, legacy', days: 21 },
      ],
      adjustments: [{ total_requests: 3, amount_usd: '0.009', created_at: '2026-11-03T01:00:00.000Z' }],
    });
    expect(JSON.parse(lines[1] as string)).toMatchObject({ account_id: 'acct_2', adjustments: [] });
  });
});
