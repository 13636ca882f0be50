import { createHmac } from 'node:crypto';
import { sign as octokitSign, verify as octokitVerify } from '@octokit/webhooks-methods';
import { describe, expect, it } from 'vitest';
import { sign, verify } from './signature.js';

const secret = 'whsec_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5';
const body = '{"id":"evt_1","type":"violation.new","created_at":"2026-11-22T08:15:30.123Z","data":{"violation":{"id":"v1"}}}';

describe('sign', () => {
  it('is sha256= and the lowercase hex HMAC-SHA256 of the raw body keyed by the whole secret as UTF-8', () => {
    const expected = `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(body, 'utf8').digest('hex')}`;
    expect(sign(secret, body)).toBe(expected);
    expect(sign(secret, body)).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it('matches a known vector', () => {
    expect(sign('whsec_test', 'hello')).toBe(`sha256=${createHmac('sha256', 'whsec_test').update('hello').digest('hex')}`);
    expect(sign('key', 'The quick brown fox jumps over the lazy dog')).toBe(
      'sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8',
    );
  });

  it('signs bytes and the equivalent string the same way', () => {
    expect(sign(secret, Buffer.from(body, 'utf8'))).toBe(sign(secret, body));
    expect(sign(secret, 'café ✓')).toBe(sign(secret, new TextEncoder().encode('café ✓')));
  });

  it('agrees with @octokit/webhooks-methods in both directions', async () => {
    expect(sign(secret, body)).toBe(await octokitSign(secret, body));
    expect(await octokitVerify(secret, body, sign(secret, body))).toBe(true);
    expect(verify(secret, body, await octokitSign(secret, body))).toBe(true);
  });
});

describe('verify', () => {
  const good = sign(secret, body);

  it('accepts the signature of the same body and secret', () => {
    expect(verify(secret, body, good)).toBe(true);
  });

  it('refuses another body, another secret, or a changed signature', () => {
    expect(verify(secret, `${body} `, good)).toBe(false);
    expect(verify(`${secret}x`, body, good)).toBe(false);
    const flipped = good.slice(0, -1) + (good.endsWith('0') ? '1' : '0');
    expect(verify(secret, body, flipped)).toBe(false);
  });

  it('refuses missing and malformed headers without throwing', () => {
    for (const header of [
      undefined,
      null,
      '',
      'sha256=',
      good.slice(7),
      `sha1=${good.slice(7)}`,
      `${good}00`,
      good.slice(0, -2),
      'sha256=zz'.padEnd(71, 'z'),
    ]) {
      expect(verify(secret, body, header)).toBe(false);
    }
  });
});
