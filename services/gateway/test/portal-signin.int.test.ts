import { type Stack, startStack } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cookieAttributes, cookieToken, send, withCookie } from './portal-helpers';

/**
 * Signing in to the customer portal (docs/api.md, "Portal"; ADR 0016): the operator's one-time
 * link (CLI and admin API), valid 10 minutes and once; the API key; the session cookie's exact
 * attributes; the session routes.
 */
const ADMIN_TOKEN = 'portal-admin-token-0123456789abcdef0123456789';
const PUBLIC_BASE_URL = 'https://api.example.test';
let stack: Stack;
let base: string;
let adminBase: string;
let db: pg.Client;

beforeAll(async () => {
  stack = await startStack({ label: 'portal_signin', gateways: 1, usageEnv: { ADMIN_TOKEN, PUBLIC_BASE_URL } });
  base = stack.gatewayUrls[0] as string;
  adminBase = `http://127.0.0.1:${(await stack.usage.waitForLog((l) => l.msg === 'ready')).port as number}`;
  db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
}, 60_000);

afterAll(async () => {
  await db?.end();
  await stack?.stop();
});

/** A link minted by the operator CLI: its path and query. */
async function cliLink(accountId: string): Promise<string> {
  const { url } = (await stack.cli(['accounts', 'portal-link', '--account', accountId])) as { url: string };
  return url;
}

const SESSION_ATTRIBUTES = ['Max-Age=43200', 'Path=/', 'HttpOnly', 'SameSite=Strict'];

describe('one-time sign-in links', () => {
  it('open a session once: the same link a second time is refused', async () => {
    const account = await stack.createAccount('free');
    const url = await cliLink(account.accountId);
    expect(url).toMatch(/^\/portal\/login\?token=fcdl_[A-Za-z0-9_-]{43}$/);
    const { rows } = await db.query(
      'SELECT extract(epoch FROM expires_at - created_at)::int AS ttl, used_at FROM usage.portal_links WHERE account_id = $1',
      [account.accountId],
    );
    expect(rows).toEqual([{ ttl: 600, used_at: null }]);

    const first = await send(base, url);
    expect([first.status, first.headers.get('location'), first.headers.get('cache-control')]).toEqual([303, '/portal/', 'no-store']);
    const token = cookieToken(first) as string;
    expect(token).toMatch(/^fcds_[A-Za-z0-9_-]{43}$/);
    expect(cookieAttributes(first)).toEqual([`fcd_portal=${token}`, ...SESSION_ATTRIBUTES]);

    const again = await send(base, url);
    expect([again.status, again.headers.get('location'), again.headers.getSetCookie()]).toEqual([303, '/portal/?error=link', []]);

    const session = await send(base, '/portal/session', { headers: withCookie(token) });
    expect(session.status).toBe(200);
    expect(session.json).toEqual({
      account_id: account.accountId,
      tier: 'free',
      csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    // Only digests are stored: neither token is in the tables.
    const stored = await db.query(
      `SELECT (SELECT count(*) FROM usage.portal_sessions WHERE digest = $1 OR digest = $2)::int
            + (SELECT count(*) FROM usage.portal_links WHERE digest = $1 OR digest = $2)::int AS n`,
      [token, url.split('token=')[1]],
    );
    expect(stored.rows).toEqual([{ n: 0 }]);
    const row = await db.query(
      `SELECT origin, key_id, extract(epoch FROM expires_at - created_at)::int AS ttl FROM usage.portal_sessions WHERE account_id = $1`,
      [account.accountId],
    );
    expect(row.rows).toEqual([{ origin: 'link', key_id: null, ttl: 43_200 }]);
  });

  it('one use even when redeemed concurrently', async () => {
    const account = await stack.createAccount('free');
    const url = await cliLink(account.accountId);
    const answers = await Promise.all(Array.from({ length: 8 }, () => send(base, url)));
    const locations = answers.map((a) => a.headers.get('location')).sort();
    expect(locations).toEqual(['/portal/', ...Array.from({ length: 7 }, () => '/portal/?error=link')]);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM usage.portal_sessions WHERE account_id = $1', [account.accountId]);
    expect(rows).toEqual([{ n: 1 }]);
  });

  it('refuses an expired, malformed, unknown or missing token', async () => {
    const account = await stack.createAccount('free');
    const url = await cliLink(account.accountId);
    await db.query("UPDATE usage.portal_links SET expires_at = now() - interval '1 second' WHERE account_id = $1", [account.accountId]);
    for (const path of [url, '/portal/login?token=nope', `/portal/login?token=fcdl_${'A'.repeat(43)}`, '/portal/login']) {
      const r = await send(base, path);
      expect([path, r.status, r.headers.get('location'), r.headers.getSetCookie()]).toEqual([path, 303, '/portal/?error=link', []]);
    }
    const { rows } = await db.query('SELECT used_at FROM usage.portal_links WHERE account_id = $1', [account.accountId]);
    expect(rows).toEqual([{ used_at: null }]);
  });

  it('are minted by the admin API, with PUBLIC_BASE_URL in front', async () => {
    const account = await stack.createAccount('pro');
    const mint = (id: string, auth = `Bearer ${ADMIN_TOKEN}`) =>
      send(adminBase, `/admin/v1/accounts/${id}/portal-links`, { method: 'POST', headers: { authorization: auth } });
    const minted = await mint(account.accountId);
    expect(minted.status).toBe(201);
    expect(minted.json).toEqual({
      data: {
        url: expect.stringMatching(/^https:\/\/api\.example\.test\/portal\/login\?token=fcdl_[A-Za-z0-9_-]{43}$/),
        expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      },
    });
    const opened = await send(base, (minted.json.data.url as string).slice(PUBLIC_BASE_URL.length));
    expect([opened.status, opened.headers.get('location')]).toEqual([303, '/portal/']);
    const session = await send(base, '/portal/session', { headers: withCookie(cookieToken(opened) as string) });
    expect([session.json.account_id, session.json.tier]).toEqual([account.accountId, 'pro']);

    const unknown = await mint('acct_00000000-0000-4000-8000-000000000000');
    expect([unknown.status, unknown.json.error.code]).toEqual([404, 'NOT_FOUND']);
    expect((await mint(account.accountId, 'Bearer wrong')).status).toBe(401);
  });
});

describe('signing in with an API key', () => {
  it('answers the session and sets the cookie; the key is not kept in it', async () => {
    const account = await stack.createAccount('free');
    const r = await send(base, '/portal/session', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: account.apiKey }),
    });
    expect(r.status).toBe(200);
    const token = cookieToken(r) as string;
    expect(cookieAttributes(r)).toEqual([`fcd_portal=${token}`, ...SESSION_ATTRIBUTES]);
    expect(r.text).not.toContain(account.apiKey);
    expect(token).not.toContain(account.apiKey);
    expect(r.json).toEqual({
      account_id: account.accountId,
      tier: 'free',
      csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      expires_at: expect.any(String),
    });
    const { rows } = await db.query('SELECT origin, key_id FROM usage.portal_sessions WHERE account_id = $1', [account.accountId]);
    expect(rows).toEqual([{ origin: 'key', key_id: account.keyId }]);
    const got = await send(base, '/portal/session', { headers: withCookie(token) });
    expect(got.json).toEqual(r.json);
  });

  it('refuses a bad key with 401, a cross-site sign-in with 403, and a body without a key or with another field with 400', async () => {
    const account = await stack.createAccount('free');
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      send(base, '/portal/session', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const bad = await post({ api_key: `fcd_${'x'.repeat(32)}` });
    expect([bad.status, bad.json.error.code, bad.headers.getSetCookie()]).toEqual([401, 'UNAUTHORIZED', []]);
    const malformed = await post({ api_key: 'hello' });
    expect([malformed.status, malformed.json.error.code]).toEqual([401, 'UNAUTHORIZED']);
    const crossSite = await post({ api_key: account.apiKey }, { origin: 'https://evil.example' });
    expect([crossSite.status, crossSite.json.error.code, crossSite.json.error.details, crossSite.headers.getSetCookie()]).toEqual([
      403,
      'FORBIDDEN',
      { reason: 'csrf' },
      [],
    ]);
    const missing = await post({});
    expect([missing.status, missing.json.error.code]).toEqual([400, 'VALIDATION_ERROR']);
    const extra = await post({ api_key: account.apiKey, remember: true });
    expect([extra.status, extra.json.error.code, extra.headers.getSetCookie()]).toEqual([400, 'VALIDATION_ERROR', []]);
    await stack.cli(['keys', 'revoke', '--key', account.keyId]);
    const revoked = await post({ api_key: account.apiKey });
    expect([revoked.status, revoked.json.error.code]).toEqual([401, 'UNAUTHORIZED']);
  });

  it('marks the cookie Secure only when the request came over TLS (X-Forwarded-Proto https)', async () => {
    const account = await stack.createAccount('free');
    const signIn = (headers: Record<string, string>) =>
      send(base, '/portal/session', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ api_key: account.apiKey }),
      });
    const tls = await signIn({ 'x-forwarded-proto': 'https' });
    expect(cookieAttributes(tls)).toEqual([
      `fcd_portal=${cookieToken(tls)}`,
      'Max-Age=43200',
      'Path=/',
      'HttpOnly',
      'Secure',
      'SameSite=Strict',
    ]);
    const plain = await signIn({ 'x-forwarded-proto': 'http' });
    expect(cookieAttributes(plain)).toEqual([`fcd_portal=${cookieToken(plain)}`, ...SESSION_ATTRIBUTES]);
  });

  it('GET /portal/session without a live session is 401', async () => {
    const none = await send(base, '/portal/session');
    expect([none.status, none.json.error.code]).toEqual([401, 'UNAUTHORIZED']);
    const unknown = await send(base, '/portal/session', { headers: withCookie(`fcds_${'A'.repeat(43)}`) });
    expect([unknown.status, unknown.json.error.code]).toEqual([401, 'UNAUTHORIZED']);
  });
});
