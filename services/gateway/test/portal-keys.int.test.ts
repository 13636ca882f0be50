import { type Stack, startStack } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cookieToken, send, withCookie } from './portal-helpers';

/**
 * Key management in a portal session (docs/api.md, "Audit log"; ADR 0016): a session opened by the
 * operator's one-time link has no key, yet manages the account's keys; every change is audited
 * with the session as its actor (its public id, never its token), and so is one made in a session
 * opened with a key.
 */
let stack: Stack;
let base: string;
let db: pg.Client;

beforeAll(async () => {
  stack = await startStack({ label: 'portal_keys', gateways: 1 });
  base = stack.gatewayUrls[0] as string;
  db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
}, 60_000);

afterAll(async () => {
  await db?.end();
  await stack?.stop();
});

/** A session's cookie token, CSRF token and public id (`pses_…`, from the table: the API never shows it but in the log). */
async function sessionOf(token: string) {
  const session = await send(base, '/portal/session', { headers: withCookie(token) });
  expect(session.status).toBe(200);
  const { rows } = await db.query<{ id: string }>('SELECT id FROM usage.portal_sessions WHERE account_id = $1 ORDER BY created_at', [
    session.json.account_id,
  ]);
  return { token, csrf: session.json.csrf_token as string, id: rows.at(-1)?.id as string };
}

async function linkSession(accountId: string) {
  const { url } = (await stack.cli(['accounts', 'portal-link', '--account', accountId])) as { url: string };
  const opened = await send(base, url);
  expect(opened.status).toBe(303);
  return sessionOf(cookieToken(opened) as string);
}

async function keySession(apiKey: string) {
  const opened = await send(base, '/portal/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key: apiKey }),
  });
  expect(opened.status).toBe(200);
  return sessionOf(cookieToken(opened) as string);
}

function inSession(s: { token: string; csrf: string }) {
  return (method: string, path: string, body?: unknown) =>
    send(base, path, {
      method,
      headers: withCookie(s.token, { 'x-csrf-token': s.csrf, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
}

describe('key management in a portal session', () => {
  it('works in a session opened by a link, audited with the session as the actor', async () => {
    const account = await stack.createAccount('free');
    const session = await linkSession(account.accountId);
    expect(session.id).toMatch(/^pses_[0-9a-f-]{36}$/);
    const call = inSession(session);

    const created = await call('POST', '/v1/account/keys', { name: 'from a link' });
    expect([created.status, created.json.data.name]).toEqual([201, 'from a link']);
    const id = created.json.data.id as string;
    const renamed = await call('PATCH', `/v1/account/keys/${id}`, { name: 'renamed' });
    expect([renamed.status, renamed.json.data.name]).toEqual([200, 'renamed']);
    const rolled = await call('POST', `/v1/account/keys/${id}/roll`, { expires_in_seconds: 0 });
    expect([rolled.status, rolled.json.data.previous.id]).toEqual([201, id]);
    const newId = rolled.json.data.id as string;
    expect((await call('DELETE', `/v1/account/keys/${newId}`)).status).toBe(204);
    // The account's last live key: the session may not revoke it, as a key may not.
    const last = await call('DELETE', `/v1/account/keys/${account.keyId}`);
    expect([last.status, last.json.error.code]).toEqual([409, 'LIMIT_REACHED']);

    const log = await call('GET', '/v1/account/audit-log');
    expect(log.status).toBe(200);
    const actor = { type: 'portal_session', session_id: session.id };
    expect(log.json.data.map((e: any) => [e.action, e.key_id, e.actor])).toEqual([
      ['key.revoked', newId, actor],
      ['key.rolled', id, actor],
      ['key.renamed', id, actor],
      ['key.created', id, actor],
      ['key.created', account.keyId, { type: 'operator' }],
    ]);
    expect(JSON.stringify(log.json)).not.toContain(session.token);
  });

  it('names the session, not its key, in a session opened with a key; the key itself is the actor of its own calls', async () => {
    const account = await stack.createAccount('free');
    const session = await keySession(account.apiKey);
    const created = await inSession(session)('POST', '/v1/account/keys', { name: 'in the portal' });
    expect(created.status).toBe(201);
    const byKey = await send(base, `/v1/account/keys/${created.json.data.id}`, {
      method: 'PATCH',
      headers: { 'x-api-key': account.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'by the key' }),
    });
    expect(byKey.status).toBe(200);
    const log = await send(base, '/v1/account/audit-log', { headers: { 'x-api-key': account.apiKey } });
    expect(log.json.data.map((e: any) => [e.action, e.actor])).toEqual([
      ['key.renamed', { type: 'key', key_id: account.keyId }],
      ['key.created', { type: 'portal_session', session_id: session.id }],
      ['key.created', { type: 'operator' }],
    ]);
  });
});
