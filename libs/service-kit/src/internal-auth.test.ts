import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock';
import { INTERNAL_AUTH_TTL_MS, InternalAuth, type InternalTarget, requestTarget } from './internal-auth';

const SECRET = 'internal-auth-unit-test-secret-0123456789';
const claims = { account_id: 'acct_1', tier: 'pro', tier_rank: 1, request_id: 'req_1' };
const target: InternalTarget = { audience: 'webhook', method: 'POST', path: '/v1/webhooks?x=1' };

describe('InternalAuth', () => {
  it('verifies a header for the request it was signed for, and returns its claims', () => {
    const clock = new ManualClock(1_000_000);
    const auth = new InternalAuth(SECRET, undefined, clock);
    expect(auth.verify(auth.sign(claims, target), target)).toEqual(claims);
    expect(auth.verify(auth.sign(claims, { ...target, method: 'post' }), target)).toEqual(claims);
    expect(auth.verify(auth.sign(claims, target), requestTarget({ method: 'POST', url: '/v1/webhooks?x=1' }, 'webhook'))).toEqual(claims);
  });

  it("signs the account's claims and the target, nothing else, request_id only when given", () => {
    const auth = new InternalAuth(SECRET, undefined, new ManualClock(1_000_000));
    const payloadOf = (header: string) => JSON.parse(Buffer.from(header.split('.')[0] as string, 'base64url').toString());
    const extra = { ...claims, secret_note: 'not a claim' } as typeof claims;
    const signed = payloadOf(auth.sign(extra, { ...target, method: 'post' }));
    expect(Object.keys(signed)).toEqual(['account_id', 'tier', 'tier_rank', 'request_id', 'aud', 'm', 'p', 'exp']);
    expect(signed).toEqual({ ...claims, aud: 'webhook', m: 'POST', p: '/v1/webhooks?x=1', exp: 1_000_000 + INTERNAL_AUTH_TTL_MS });
    const { request_id: _omitted, ...withoutRequest } = claims;
    const header = auth.sign(withoutRequest, target);
    expect(Object.keys(payloadOf(header))).toEqual(['account_id', 'tier', 'tier_rank', 'aud', 'm', 'p', 'exp']);
    expect(auth.verify(header, target)).toEqual(withoutRequest);
  });

  it.each<[string, Partial<InternalTarget>]>([
    ['another service', { audience: 'facility' }],
    ['another method', { method: 'GET' }],
    ['another path', { path: '/v1/webhooks/wh_1?x=1' }],
    ['another query', { path: '/v1/webhooks?x=2' }],
    ['no query', { path: '/v1/webhooks' }],
  ])('refuses a header replayed to %s', (_label, change) => {
    const auth = new InternalAuth(SECRET, undefined, new ManualClock(1_000_000));
    expect(auth.verify(auth.sign(claims, target), { ...target, ...change })).toBeUndefined();
  });

  it(`accepts a header for ${INTERNAL_AUTH_TTL_MS} ms after signing, not a millisecond more`, () => {
    const clock = new ManualClock(1_000_000);
    const auth = new InternalAuth(SECRET, undefined, clock);
    const header = auth.sign(claims, target);
    clock.advance(INTERNAL_AUTH_TTL_MS);
    expect(auth.verify(header, target)).toEqual(claims);
    clock.advance(1);
    expect(auth.verify(header, target)).toBeUndefined();
    expect(INTERNAL_AUTH_TTL_MS).toBe(5_000);
  });

  it('refuses a header signed with another secret, a tampered one, and garbage', () => {
    const clock = new ManualClock(1_000_000);
    const auth = new InternalAuth(SECRET, undefined, clock);
    const other = new InternalAuth(`${SECRET}-other`, undefined, clock);
    expect(auth.verify(other.sign(claims, target), target)).toBeUndefined();
    const [payload, mac] = auth.sign(claims, target).split('.') as [string, string];
    const widened = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), p: '/v1/webhooks' }),
    ).toString('base64url');
    expect(auth.verify(`${widened}.${mac}`, { ...target, path: '/v1/webhooks' })).toBeUndefined();
    for (const header of [undefined, '', '.', 'abc', ['a', 'b'], `${payload}.`]) expect(auth.verify(header, target)).toBeUndefined();
  });

  it('returns the account fields only, whatever else a signed payload holds', () => {
    const clock = new ManualClock(1_000_000);
    const auth = new InternalAuth(SECRET, undefined, clock);
    const signed = { ...claims, aud: 'webhook', m: 'POST', p: '/v1/webhooks?x=1', exp: 1_005_000, scope: 'admin' };
    const payload = Buffer.from(JSON.stringify(signed)).toString('base64url');
    const header = `${payload}.${createHmac('sha256', SECRET).update(payload).digest('base64url')}`;
    const verified = auth.verify(header, target);
    expect(verified).toEqual(claims);
    expect(Object.keys(verified ?? {})).toEqual(['account_id', 'tier', 'tier_rank', 'request_id']);
  });
});
