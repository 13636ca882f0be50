import { eventually, type Stack, startStack } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cookieAttributes, cookieToken, send, withCookie } from './portal-helpers';

/**
 * The portal session on /v1 (docs/api.md, "Portal"; ADR 0016): metered exactly like an API key;
 * writes need the session's X-CSRF-Token and this origin (a cross-site form POST is refused);
 * signing out revokes the session on every gateway at once.
 */
let stack: Stack;
let base: string;
let second: string;

beforeAll(async () => {
  stack = await startStack({ label: 'portal_csrf', gateways: 2 });
  [base, second] = stack.gatewayUrls as [string, string];
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

/** An account, its key, and a portal session opened with the key: its cookie token and CSRF token. */
async function signedIn(tier: 'free' | 'pro' = 'free') {
  const account = await stack.createAccount(tier);
  const r = await send(base, '/portal/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key: account.apiKey }),
  });
  expect(r.status).toBe(200);
  return { ...account, session: cookieToken(r) as string, csrf: r.json.csrf_token as string };
}

const usageWith = (headers: Record<string, string>, at = base) => send(at, '/v1/account/usage', { headers });
const todayCount = (r: { json: any }) => r.json.data.today.request_count as number;

describe('a portal session on /v1', () => {
  it('is counted exactly like the API key: the same counter, limits and headers; the session routes are not counted', async () => {
    const a = await signedIn();
    const byKey = await usageWith({ 'x-api-key': a.apiKey });
    expect([byKey.status, todayCount(byKey), byKey.headers.get('x-ratelimit-remaining')]).toEqual([200, 1, '99']);
    // GET /portal/session (and the sign-in above) are outside /v1: not counted.
    expect((await send(base, '/portal/session', { headers: withCookie(a.session) })).status).toBe(200);
    const byCookie = await usageWith(withCookie(a.session));
    expect([byCookie.status, todayCount(byCookie), byCookie.headers.get('x-ratelimit-remaining')]).toEqual([200, 2, '98']);
    expect(byCookie.json.data.tier).toBe('free');
    const onSecond = await usageWith(withCookie(a.session), second);
    expect([onSecond.status, todayCount(onSecond)]).toEqual([200, 3]);
    await eventually(
      () => stack.storedCount(a.accountId),
      (n) => n === 3,
    );
  });

  it('meets the same daily limit (429) as the key', async () => {
    const account = (await stack.cli(['accounts', 'create', '--name', 'limited', '--tier', 'free', '--daily-limit', '2'])) as {
      id: string;
    };
    const key = (await stack.cli(['keys', 'create', '--account', account.id])) as { apiKey: string };
    const signIn = await send(base, '/portal/session', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: key.apiKey }),
    });
    const session = cookieToken(signIn) as string;
    expect((await usageWith({ 'x-api-key': key.apiKey })).status).toBe(200);
    expect((await usageWith(withCookie(session))).status).toBe(200);
    const over = await usageWith(withCookie(session));
    expect([over.status, over.json.error.code, over.headers.get('x-ratelimit-remaining')]).toEqual([429, 'RATE_LIMIT_EXCEEDED', '0']);
    const overByKey = await usageWith({ 'x-api-key': key.apiKey });
    expect([overByKey.status, overByKey.json.error.code]).toEqual([429, 'RATE_LIMIT_EXCEEDED']);
  });

  it('is refused when sent as X-API-Key: a session is used only through its cookie', async () => {
    const a = await signedIn();
    const r = await usageWith({ 'x-api-key': a.session });
    expect([r.status, r.json.error.code]).toEqual([401, 'UNAUTHORIZED']);
  });
});

describe('CSRF', () => {
  const createKey = (headers: Record<string, string>, body = JSON.stringify({ name: 'from the portal' })) =>
    send(base, '/v1/account/keys', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

  it("refuses a cookie-authenticated write without the X-CSRF-Token, or with another session's, uncounted", async () => {
    const a = await signedIn();
    const other = await signedIn();
    for (const headers of [
      withCookie(a.session),
      withCookie(a.session, { 'x-csrf-token': other.csrf }),
      withCookie(a.session, { 'x-csrf-token': '' }),
    ]) {
      const r = await createKey(headers);
      expect([r.status, r.json.error.code, r.json.error.details]).toEqual([403, 'FORBIDDEN', { reason: 'csrf' }]);
    }
    const usage = await usageWith({ 'x-api-key': a.apiKey });
    expect(todayCount(usage)).toBe(1);
  });

  it('refuses a cross-site form POST, even with the right token', async () => {
    const a = await signedIn();
    const form = (headers: Record<string, string>) =>
      send(base, '/v1/account/keys', {
        method: 'POST',
        headers: withCookie(a.session, { 'content-type': 'application/x-www-form-urlencoded', ...headers }),
        body: 'name=evil',
      });
    const crossSiteHeaders: Array<Record<string, string>> = [
      { origin: 'https://evil.example' },
      { origin: 'https://evil.example', 'x-csrf-token': a.csrf },
      { 'sec-fetch-site': 'cross-site', 'x-csrf-token': a.csrf },
      { origin: 'null', 'x-csrf-token': a.csrf },
    ];
    for (const headers of crossSiteHeaders) {
      const r = await form(headers);
      expect([r.status, r.json.error.code, r.json.error.details]).toEqual([403, 'FORBIDDEN', { reason: 'csrf' }]);
    }
    const json = await createKey(withCookie(a.session, { origin: 'https://evil.example', 'x-csrf-token': a.csrf }));
    expect([json.status, json.json.error.details]).toEqual([403, { reason: 'csrf' }]);
    const usage = await usageWith({ 'x-api-key': a.apiKey });
    expect(todayCount(usage)).toBe(1);
  });

  it('lets a write with the token from the same origin through, counted', async () => {
    const a = await signedIn();
    const r = await createKey(withCookie(a.session, { origin: base, 'sec-fetch-site': 'same-origin', 'x-csrf-token': a.csrf }));
    expect([r.status, r.json.data.name]).toEqual([201, 'from the portal']);
    const noOrigin = await createKey(withCookie(a.session, { 'x-csrf-token': a.csrf }), JSON.stringify({ name: 'second' }));
    expect(noOrigin.status).toBe(201);
    const usage = await usageWith(withCookie(a.session));
    expect(todayCount(usage)).toBe(3);
  });

  it('leaves requests with an API key alone, whatever cookie or origin they carry', async () => {
    const a = await signedIn();
    const r = await createKey({ 'x-api-key': a.apiKey, origin: 'https://evil.example', cookie: `fcd_portal=${a.session}` });
    expect(r.status).toBe(201);
  });
});

describe('signing out', () => {
  it('DELETE /portal/session needs the CSRF token, then revokes the session on every gateway at once', async () => {
    const a = await signedIn();
    const refused = await send(base, '/portal/session', { method: 'DELETE', headers: withCookie(a.session) });
    expect([refused.status, refused.json.error.details]).toEqual([403, { reason: 'csrf' }]);
    expect((await usageWith(withCookie(a.session), second)).status).toBe(200);

    const out = await send(base, '/portal/session', { method: 'DELETE', headers: withCookie(a.session, { 'x-csrf-token': a.csrf }) });
    expect(out.status).toBe(204);
    expect(cookieAttributes(out)).toEqual([
      'fcd_portal=',
      'Max-Age=0',
      'Path=/',
      'Expires=Thu, 01 Jan 1970 00:00:00 GMT',
      'HttpOnly',
      'SameSite=Strict',
    ]);
    for (const at of [base, second]) {
      const r = await usageWith(withCookie(a.session), at);
      expect([at, r.status, r.json.error.code]).toEqual([at, 401, 'UNAUTHORIZED']);
      const s = await send(at, '/portal/session', { headers: withCookie(a.session) });
      expect([at, s.status]).toEqual([at, 401]);
    }
    // The key itself is unaffected.
    expect((await usageWith({ 'x-api-key': a.apiKey })).status).toBe(200);
    expect((await send(base, '/portal/session', { method: 'DELETE' })).status).toBe(401);
  });

  it('a session past its 12 hours is refused like a revoked one', async () => {
    const a = await signedIn();
    expect((await usageWith(withCookie(a.session))).status).toBe(200);
    const db = new pg.Client({ connectionString: stack.db.url });
    await db.connect();
    try {
      await db.query("UPDATE usage.portal_sessions SET expires_at = now() - interval '1 second' WHERE account_id = $1", [a.accountId]);
    } finally {
      await db.end();
    }
    // The expiry is read with the session's principal: the key cache (200 ms in the test stack) bounds it.
    const r = await eventually(
      () => usageWith(withCookie(a.session)),
      (x) => x.status === 401,
    );
    expect(r.json.error.code).toBe('UNAUTHORIZED');
    expect((await send(base, '/portal/session', { headers: withCookie(a.session) })).status).toBe(401);
    expect((await usageWith({ 'x-api-key': a.apiKey })).status).toBe(200);
  });

  it('a session made from a key ends when the key is revoked', async () => {
    const a = await signedIn();
    expect((await usageWith(withCookie(a.session))).status).toBe(200);
    await stack.cli(['keys', 'revoke', '--key', a.keyId]);
    // The CLI has no Redis: the usage service's key cache (200 ms in the test stack) bounds it.
    const r = await eventually(
      () => usageWith(withCookie(a.session)),
      (x) => x.status === 401,
    );
    expect(r.json.error.code).toBe('UNAUTHORIZED');
    expect((await send(base, '/portal/session', { headers: withCookie(a.session) })).status).toBe(401);
  });
});
