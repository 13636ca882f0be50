import { randomBytes, randomUUID } from 'node:crypto';
import { type ApiStack, eventually, startApiStack, type TestAccount, testUrls } from '@fcd/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Idempotency-Key on POSTs through the whole stack (gateway, usage, webhook, facility; real
 * Postgres and Redis): one subscription however often and however concurrently the same request
 * is sent, the first answer replayed byte for byte, another request with the key refused.
 */
let stack: ApiStack;
let pro: TestAccount;

async function post(path: string, key: string, body: unknown, idempotencyKey?: string) {
  const res = await fetch(`${stack.gateway}${path}`, {
    method: 'POST',
    headers: {
      'x-api-key': key,
      'content-type': 'application/json',
      ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

async function subscriptions(accountId: string): Promise<number> {
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook.subscriptions WHERE account_id = $1', [
      accountId,
    ]);
    return rows[0]?.n ?? 0;
  } finally {
    await client.end();
  }
}

const BODY = { url: 'https://93.184.215.14/hook', events: ['violation.new'] };

beforeAll(async () => {
  stack = await startApiStack({ label: 'gateway_idempotency', webhookSecretKey: randomBytes(32).toString('base64') });
  pro = await stack.createAccount('pro');
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

describe('Idempotency-Key', () => {
  it('creates one subscription when the same key is sent twice, then concurrently; every replay is byte-identical', async () => {
    const key = `create-${randomUUID()}`;
    const first = await post('/v1/webhooks', pro.apiKey, BODY, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const created = JSON.parse(first.bytes.toString()) as { data: { id: string; secret: string } };
    expect(created.data.secret).toMatch(/^whsec_/);

    const second = await post('/v1/webhooks', pro.apiKey, BODY, key);
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.bytes.equals(first.bytes)).toBe(true);
    expect(second.headers.get('content-type')).toBe(first.headers.get('content-type'));
    // A replay is counted like any request and carries the rate-limit headers of its own count.
    expect(Number(second.headers.get('x-ratelimit-remaining'))).toBe(Number(first.headers.get('x-ratelimit-remaining')) - 1);

    const concurrent = await Promise.all(Array.from({ length: 8 }, () => post('/v1/webhooks', pro.apiKey, BODY, key)));
    for (const r of concurrent) {
      expect(r.status).toBe(201);
      expect(r.bytes.equals(first.bytes)).toBe(true);
    }
    expect(await subscriptions(pro.accountId)).toBe(1);

    // A fresh key, sent concurrently from the start: the duplicates wait for the first and replay it.
    const fresh = `concurrent-${randomUUID()}`;
    const racing = await Promise.all(Array.from({ length: 8 }, () => post('/v1/webhooks', pro.apiKey, BODY, fresh)));
    expect(racing.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(racing.filter((r) => r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    for (const r of racing) expect(r.bytes.equals((racing[0] as { bytes: Buffer }).bytes)).toBe(true);
    expect(await subscriptions(pro.accountId)).toBe(2);

    // All 2 + 8 + 8 requests were counted.
    expect(
      await eventually(
        () => stack.storedCount(pro.accountId),
        (n) => n === 18,
        10_000,
      ),
    ).toBe(18);
  });

  it('refuses the same key with another body (422 IDEMPOTENCY_KEY_REUSED, nothing created); keys are scoped to the account', async () => {
    const account = await stack.createAccount('pro');
    const key = `reuse-${randomUUID()}`;
    expect((await post('/v1/webhooks', account.apiKey, BODY, key)).status).toBe(201);
    const other = await post('/v1/webhooks', account.apiKey, { ...BODY, events: ['case.new'] }, key);
    expect(other.status).toBe(422);
    expect(JSON.parse(other.bytes.toString())).toEqual({
      error: {
        code: 'IDEMPOTENCY_KEY_REUSED',
        message:
          'This Idempotency-Key was used with another request (method, path or body) in the last 24 hours. Use a new key for a new request.',
      },
    });
    expect(other.headers.get('x-ratelimit-limit')).toBe('25000');
    expect(await subscriptions(account.accountId)).toBe(1);

    // Keys are scoped to the account: another account's same key is a new request.
    const neighbour = await stack.createAccount('pro');
    const theirs = await post('/v1/webhooks', neighbour.apiKey, BODY, key);
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(await subscriptions(neighbour.accountId)).toBe(1);
  });

  it('works on every POST route (rotate-secret shown), stores answers encrypted with a 24 h TTL, and refuses malformed keys', async () => {
    const account = await stack.createAccount('pro');
    const created = JSON.parse((await post('/v1/webhooks', account.apiKey, BODY)).bytes.toString()) as { data: { id: string } };
    const key = `rotate-${randomUUID()}`;
    const rotated = await post(`/v1/webhooks/${created.data.id}/rotate-secret`, account.apiKey, {}, key);
    expect(rotated.status).toBe(200);
    const secret = (JSON.parse(rotated.bytes.toString()) as { data: { secret: string } }).data.secret;
    const replay = await post(`/v1/webhooks/${created.data.id}/rotate-secret`, account.apiKey, {}, key);
    expect(replay.bytes.equals(rotated.bytes)).toBe(true); // the secret was not rotated again

    const redis = new Redis(testUrls.redis);
    try {
      const keys = await redis.keys(`*idem:{${account.accountId}}:*`);
      expect(keys).toHaveLength(1);
      const stored = (await redis.get(keys[0] as string)) as string;
      expect(stored).not.toContain(secret);
      expect(stored).not.toContain(secret.slice(6, 30));
      const ttl = await redis.pttl(keys[0] as string);
      expect(ttl).toBeGreaterThan(86_400_000 - 60_000);
      expect(ttl).toBeLessThanOrEqual(86_400_000);
    } finally {
      redis.disconnect();
    }

    for (const bad of ['', 'x'.repeat(256), 'key with spaces']) {
      const res = await post('/v1/webhooks', account.apiKey, BODY, bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(JSON.parse(res.bytes.toString()).error.details.fields).toEqual([
        { field: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters, sent once' },
      ]);
    }
    expect(await subscriptions(account.accountId)).toBe(1);
  });
});
