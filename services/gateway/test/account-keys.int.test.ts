import { eventually, type Stack, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The account's own API keys through the gateway (docs/api.md, "API keys"): list, create, rename,
 * revoke, roll; the documented errors; and that these calls are counted like any /v1 request.
 */
let stack: Stack;
let base: string;

beforeAll(async () => {
  stack = await startStack({ label: 'account_keys', gateways: 1 });
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

const fieldsOf = (r: { json: { error: { details: { fields: Array<{ field: string }> } } } }) =>
  r.json.error.details.fields.map((f) => f.field);

describe('account keys through the gateway', () => {
  it('lists the account key without the key, creates a second one that works on the same daily counter', async () => {
    const account = await stack.createAccount('free');
    const sent = Date.now();
    const list = await api(account.apiKey, 'GET', '/v1/account/keys');
    const answered = Date.now();
    expect(list.status).toBe(200);
    expect(list.headers.get('x-ratelimit-remaining')).toBe('99');
    // This request is the key's first use: the batched flush (200 ms here) may write it before the
    // list is read, so last_used_at is either not written yet or the time of this very request.
    const lastUsed = list.json.data[0]?.last_used_at as string | null;
    expect(lastUsed === null || (Date.parse(lastUsed) >= sent && Date.parse(lastUsed) <= answered), String(lastUsed)).toBe(true);
    expect(list.json).toEqual({
      data: [
        {
          id: account.keyId,
          name: 'default',
          prefix: account.apiKey.slice(0, 8),
          created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          last_used_at: lastUsed,
          expires_at: null,
          revoked_at: null,
        },
      ],
    });
    expect(list.text).not.toContain(account.apiKey);

    const created = await api(account.apiKey, 'POST', '/v1/account/keys', { name: 'ci' });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({ name: 'ci', expires_at: null, revoked_at: null, last_used_at: null });
    const second = created.json.data.key as string;
    expect(second).toMatch(/^fcd_[A-Za-z0-9]{32}$/);
    expect(created.json.data.prefix).toBe(second.slice(0, 8));

    // The second key is the same account: the account-management calls were counted (2 so far), this is the 3rd.
    const usage = await api(second, 'GET', '/v1/account/usage');
    expect(usage.status).toBe(200);
    expect(usage.json.data.today.request_count).toBe(3);
    // The first key's use reaches last_used_at with the batched flush (200 ms in the test stack).
    const used = await eventually(
      async () => (await api(second, 'GET', '/v1/account/keys')).json.data[0].last_used_at as string | null,
      (v) => v !== null,
    );
    expect(Date.parse(used as string)).toBeGreaterThan(Date.now() - 60_000);
    const again = await api(account.apiKey, 'GET', '/v1/account/keys');
    expect(again.json.data.map((k: { name: string }) => k.name)).toEqual(['default', 'ci']);
    expect(again.text).not.toContain(second);

    // An expiry with an offset is kept as ISO UTC.
    const expiring = await api(account.apiKey, 'POST', '/v1/account/keys', { name: 'expiring', expires_at: '2099-01-01t02:00:00+02:00' });
    expect([expiring.status, expiring.json.data.expires_at]).toEqual([201, '2099-01-01T00:00:00.000Z']);
  });

  it('refuses bad input with VALIDATION_ERROR naming the field', async () => {
    const { apiKey, keyId } = await stack.createAccount('free');
    const cases: Array<[string, string, unknown, string[]]> = [
      ['POST', '/v1/account/keys', {}, ['name']],
      ['POST', '/v1/account/keys', { name: '' }, ['name']],
      ['POST', '/v1/account/keys', { name: '   ' }, ['name']],
      ['POST', '/v1/account/keys', { name: 'a\u0007b' }, ['name']],
      ['POST', '/v1/account/keys', { name: 'x'.repeat(101) }, ['name']],
      ['POST', '/v1/account/keys', { name: 'x', expires_at: 'tomorrow' }, ['expires_at']],
      ['POST', '/v1/account/keys', { name: 'x', expires_at: '2020-01-01T00:00:00.000Z' }, ['expires_at']],
      ['POST', '/v1/account/keys', { name: 'x', colour: 'red' }, ['colour']],
      ['PATCH', `/v1/account/keys/${keyId}`, {}, ['name']],
      ['POST', `/v1/account/keys/${keyId}/roll`, { expires_in_seconds: 604_801 }, ['expires_in_seconds']],
      ['POST', `/v1/account/keys/${keyId}/roll`, { expires_in_seconds: -1 }, ['expires_in_seconds']],
      ['POST', `/v1/account/keys/${keyId}/roll`, { expires_in_seconds: 1.5 }, ['expires_in_seconds']],
    ];
    for (const [method, path, body, fields] of cases) {
      const r = await api(apiKey, method, path, body);
      expect([method, path, JSON.stringify(body), r.status, r.json.error.code]).toEqual([
        method,
        path,
        JSON.stringify(body),
        400,
        'VALIDATION_ERROR',
      ]);
      expect([...new Set(fieldsOf(r))]).toEqual(fields);
    }
  });

  it('renames; unknown, malformed and other accounts’ key ids are 404', async () => {
    const mine = await stack.createAccount('pro');
    const other = await stack.createAccount('pro');
    const renamed = await api(mine.apiKey, 'PATCH', `/v1/account/keys/${mine.keyId}`, { name: 'production' });
    expect(renamed.status).toBe(200);
    expect(renamed.json.data).toMatchObject({ id: mine.keyId, name: 'production' });
    for (const id of [other.keyId, 'key_00000000-0000-4000-8000-000000000000', 'nope']) {
      expect((await api(mine.apiKey, 'PATCH', `/v1/account/keys/${id}`, { name: 'x' })).json.error.code).toBe('NOT_FOUND');
      expect((await api(mine.apiKey, 'DELETE', `/v1/account/keys/${id}`)).status).toBe(404);
      expect((await api(mine.apiKey, 'POST', `/v1/account/keys/${id}/roll`, { expires_in_seconds: 0 })).status).toBe(404);
    }
    // The other account's key is untouched.
    expect((await api(other.apiKey, 'GET', '/v1/account/keys')).json.data[0]).toMatchObject({ name: 'default', revoked_at: null });
    expect((await api(mine.apiKey, 'PUT', '/v1/account/keys')).status).toBe(405);
  });

  it('the 11th live key is 409 LIMIT_REACHED; revoking frees a place; the last live key cannot be revoked', async () => {
    const { apiKey, keyId } = await stack.createAccount('pro');
    const ids: string[] = [];
    for (let i = 2; i <= 10; i++) {
      const r = await api(apiKey, 'POST', '/v1/account/keys', { name: `k${i}` });
      expect(r.status).toBe(201);
      ids.push(r.json.data.id);
    }
    const eleventh = await api(apiKey, 'POST', '/v1/account/keys', { name: 'k11' });
    expect(eleventh.status).toBe(409);
    expect(eleventh.json).toEqual({
      error: { code: 'LIMIT_REACHED', message: expect.stringContaining('10 live API keys'), details: { limit: 10 } },
    });
    const deleted = await api(apiKey, 'DELETE', `/v1/account/keys/${ids[0]}`);
    expect([deleted.status, deleted.text]).toEqual([204, '']);
    expect((await api(apiKey, 'DELETE', `/v1/account/keys/${ids[0]}`)).status).toBe(204);
    expect((await api(apiKey, 'POST', '/v1/account/keys', { name: 'k11' })).status).toBe(201);

    const list = await api(apiKey, 'GET', '/v1/account/keys');
    const live = (list.json.data as Array<{ id: string; revoked_at: string | null }>).filter((k) => k.revoked_at === null);
    expect(live).toHaveLength(10);
    for (const k of live.filter((k) => k.id !== keyId)) expect((await api(apiKey, 'DELETE', `/v1/account/keys/${k.id}`)).status).toBe(204);
    const last = await api(apiKey, 'DELETE', `/v1/account/keys/${keyId}`);
    expect(last.status).toBe(409);
    expect(last.json.error).toMatchObject({ code: 'LIMIT_REACHED', details: { live_keys: 1 } });
  });

  it('a revoked key gets 401; rolling with 0 replaces the key at once, same name', async () => {
    const { apiKey, keyId } = await stack.createAccount('free');
    const spare = (await api(apiKey, 'POST', '/v1/account/keys', { name: 'spare' })).json.data;
    expect((await api(spare.key, 'DELETE', `/v1/account/keys/${spare.id}`)).status).toBe(204);
    const revoked = await api(spare.key, 'GET', '/v1/account/usage');
    expect([revoked.status, revoked.json.error.code, revoked.headers.get('x-ratelimit-limit')]).toEqual([401, 'UNAUTHORIZED', null]);

    const rolled = await api(apiKey, 'POST', `/v1/account/keys/${keyId}/roll`, { expires_in_seconds: 0 });
    expect(rolled.status).toBe(201);
    expect(rolled.json.data).toMatchObject({ name: 'default', previous: { id: keyId, revoked_at: expect.any(String) } });
    expect((await api(apiKey, 'GET', '/v1/account/keys')).status).toBe(401);
    expect((await api(rolled.json.data.key, 'GET', '/v1/account/keys')).status).toBe(200);
  });

  it('replays a creation sent again with the same Idempotency-Key: one key, the same answer', async () => {
    const { apiKey } = await stack.createAccount('pro');
    const send = () =>
      fetch(`${base}/v1/account/keys`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json', 'idempotency-key': 'create-ci-1' },
        body: JSON.stringify({ name: 'ci' }),
      });
    const first = await send();
    const second = await send();
    expect([first.status, second.status, second.headers.get('idempotent-replayed')]).toEqual([201, 201, 'true']);
    expect(await second.text()).toBe(await first.text());
    expect((await api(apiKey, 'GET', '/v1/account/keys')).json.data).toHaveLength(2);
  });
});
