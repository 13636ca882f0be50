import { type Stack, startStack } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The account's history through the gateway (docs/api.md, "Audit log" and "Usage history"): every
 * key change is one entry with its actor, each account sees its own, paged; the usage per day is
 * exact, with billing's overage; both are counted like any /v1 request.
 */
let stack: Stack;
let base: string;

beforeAll(async () => {
  stack = await startStack({ label: 'account_history', gateways: 1 });
  base = stack.gatewayUrls[0] as string;
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

async function api(apiKey: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: text ? JSON.parse(text) : undefined };
}

const problem = (r: { status: number; json: { error: { code: string; details?: { fields?: unknown } } } }) => [
  r.status,
  r.json.error.code,
  r.json.error.details?.fields,
];

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

describe('audit log through the gateway', () => {
  it('writes one entry per key change with the calling key as actor, newest first, in pages', async () => {
    const a = await stack.createAccount('pro');
    const ci = (await api(a.apiKey, 'POST', '/v1/account/keys', { name: 'ci' })).json.data;
    expect((await api(a.apiKey, 'PATCH', `/v1/account/keys/${ci.id}`, { name: 'deploy' })).status).toBe(200);
    const rolled = (await api(ci.key, 'POST', `/v1/account/keys/${ci.id}/roll`, { expires_in_seconds: 0 })).json.data;
    expect((await api(rolled.key, 'DELETE', `/v1/account/keys/${a.keyId}`)).status).toBe(204);
    // Refused (the last live key): nothing written.
    expect((await api(rolled.key, 'DELETE', `/v1/account/keys/${rolled.id}`)).status).toBe(409);

    const log = await api(rolled.key, 'GET', '/v1/account/audit-log');
    expect(log.status).toBe(200);
    const byKey = (keyId: string) => ({ type: 'key', key_id: keyId });
    const entry = { id: expect.stringMatching(/^aud_[0-9a-f-]{36}$/), occurred_at: expect.stringMatching(/Z$/) };
    expect(log.json).toEqual({
      data: [
        { ...entry, actor: byKey(rolled.id), action: 'key.revoked', key_id: a.keyId, details: { name: 'default', was_live: true } },
        {
          ...entry,
          actor: byKey(ci.id),
          action: 'key.rolled',
          key_id: ci.id,
          details: { name: 'deploy', new_key_id: rolled.id, expires_in_seconds: 0 },
        },
        { ...entry, actor: byKey(a.keyId), action: 'key.renamed', key_id: ci.id, details: { name: 'deploy', previous_name: 'ci' } },
        { ...entry, actor: byKey(a.keyId), action: 'key.created', key_id: ci.id, details: { name: 'ci', expires_at: null } },
        { ...entry, actor: { type: 'operator' }, action: 'key.created', key_id: a.keyId, details: { name: 'default', expires_at: null } },
      ],
      pagination: { limit: 25, next_cursor: null, has_more: false },
    });
    for (const k of [a.apiKey, ci.key, rolled.key]) expect(log.text).not.toContain(k.slice(4));

    const ids = (log.json.data as Array<{ id: string }>).map((e) => e.id);
    const first = await api(rolled.key, 'GET', '/v1/account/audit-log?limit=2');
    expect(first.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(0, 2));
    expect(first.json.pagination).toEqual({ limit: 2, next_cursor: expect.any(String), has_more: true });
    const second = await api(rolled.key, 'GET', `/v1/account/audit-log?limit=2&cursor=${first.json.pagination.next_cursor}`);
    expect(second.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(2, 4));
    const third = await api(rolled.key, 'GET', `/v1/account/audit-log?limit=2&cursor=${second.json.pagination.next_cursor}`);
    expect([third.json.data.map((e: { id: string }) => e.id), third.json.pagination]).toEqual([
      ids.slice(4),
      { limit: 2, next_cursor: null, has_more: false },
    ]);

    // Another account sees its own entries only, and cannot use this account's cursor.
    const b = await stack.createAccount('free');
    const theirs = await api(b.apiKey, 'GET', '/v1/account/audit-log');
    expect(theirs.json.data.map((e: { key_id: string; action: string }) => [e.action, e.key_id])).toEqual([['key.created', b.keyId]]);
    expect(problem(await api(b.apiKey, 'GET', `/v1/account/audit-log?cursor=${first.json.pagination.next_cursor}`))).toEqual([
      400,
      'VALIDATION_ERROR',
      [{ field: 'cursor', message: 'is not a valid cursor for this list' }],
    ]);
    for (const query of ['limit=0', 'limit=101', 'since=2026-01-01'])
      expect((await api(b.apiKey, 'GET', `/v1/account/audit-log?${query}`)).status).toBe(400);
    // Every call above was counted: 1 listing and 4 refusals of account b, then this report.
    expect((await api(b.apiKey, 'GET', '/v1/account/usage')).json.data.today.request_count).toBe(6);
  });
});

describe('usage per day through the gateway', () => {
  it("gives each day's requests and overage, today's live, every day of the range", async () => {
    const account = await stack.createAccount('pro');
    const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
    const client = new pg.Client({ connectionString: stack.db.url });
    await client.connect();
    try {
      await client.query(
        'INSERT INTO usage.daily_usage (account_id, day, request_count) VALUES ($1, $2, 30000), ($1, $3, 25000), ($1, $4, 7)',
        [account.accountId, dayOf(today - 3 * DAY_MS), dayOf(today - 2 * DAY_MS), dayOf(today - 400 * DAY_MS)],
      );
      // The account existed on those days: its tier history starts before them.
      await client.query('UPDATE usage.tier_history SET effective_at = $2 WHERE account_id = $1', [
        account.accountId,
        new Date(today - 500 * DAY_MS),
      ]);
    } finally {
      await client.end();
    }
    const from = dayOf(today - 3 * DAY_MS);
    const res = await api(account.apiKey, 'GET', `/v1/account/usage/daily?from=${from}`);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      data: {
        from,
        to: dayOf(today),
        days: [
          { date: from, requests: 30_000, included: 25_000, overage: 5000 },
          { date: dayOf(today - 2 * DAY_MS), requests: 25_000, included: 25_000, overage: 0 },
          { date: dayOf(today - DAY_MS), requests: 0, included: 25_000, overage: 0 },
          // Today: this request, counted before it was answered.
          { date: dayOf(today), requests: 1, included: 25_000, overage: 0 },
        ],
      },
    });

    const all = await api(account.apiKey, 'GET', '/v1/account/usage/daily');
    expect([all.json.data.from, all.json.data.days.length, all.json.data.days.at(-1)]).toEqual([
      dayOf(today - 29 * DAY_MS),
      30,
      { date: dayOf(today), requests: 2, included: 25_000, overage: 0 },
    ]);
    const longest = await api(account.apiKey, 'GET', `/v1/account/usage/daily?from=${dayOf(today - 399 * DAY_MS)}`);
    expect([longest.status, longest.json.data.days.length]).toEqual([200, 400]);
  });

  it('refuses more than 400 days, a range backwards, a day after today and a malformed date, naming the parameter', async () => {
    const account = await stack.createAccount('free');
    const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
    const cases: Array<[string, string, string]> = [
      [`from=${dayOf(today - 400 * DAY_MS)}`, 'from', 'must be at most 400 days before to, both included'],
      [`from=${dayOf(today - DAY_MS)}&to=${dayOf(today - 2 * DAY_MS)}`, 'from', 'must not be after to'],
      [`to=${dayOf(today + DAY_MS)}`, 'to', `must not be after today (${dayOf(today)}, UTC)`],
      ['from=2026-02-30', 'from', 'must be a date (YYYY-MM-DD)'],
    ];
    for (const [query, field, message] of cases) {
      expect(problem(await api(account.apiKey, 'GET', `/v1/account/usage/daily?${query}`))).toEqual([
        400,
        'VALIDATION_ERROR',
        [{ field, message }],
      ]);
    }
    for (const query of ['from=yesterday', 'to=2026-1-1', 'days=7']) {
      const r = await api(account.apiKey, 'GET', `/v1/account/usage/daily?${query}`);
      expect([r.status, r.json.error.details.fields[0].field]).toEqual([400, query.split('=')[0]]);
    }
  });
});
