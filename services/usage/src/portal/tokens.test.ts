import { describe, expect, it } from 'vitest';
import { digestApiKey } from '../domain/api-key';
import { portalLinkUrl } from './admin';
import { credentialDigest, isLinkToken, isSessionToken, newLinkToken, newSessionToken, SESSION_CACHE_TAG, tokenDigest } from './tokens';

const bytes = (b: number) => () => Buffer.alloc(32, b);

describe('portal tokens', () => {
  it('are a prefix and 32 random bytes in base64url, told apart from each other and from keys', () => {
    const session = newSessionToken(bytes(0xff));
    const link = newLinkToken(bytes(0));
    expect(session).toBe(`fcds_${'_'.repeat(42)}8`);
    expect(link).toBe(`fcdl_${'A'.repeat(43)}`);
    expect([isSessionToken(session), isLinkToken(session)]).toEqual([true, false]);
    expect([isSessionToken(link), isLinkToken(link)]).toEqual([false, true]);
    expect(isSessionToken(`${session}x`)).toBe(false);
    expect(isSessionToken('fcd_abcdefghijklmnopqrstuvwxyzABCDEF')).toBe(false);
  });

  it('are stored as their SHA-256 digest', () => {
    expect(tokenDigest('fcds_x')).toBe('c1f3f3541c838d1fb1d82140a3787ec6dd7f633b8a0888a2477f622ee0b06ec3');
  });

  it('a credential is a key (its digest), a session (tagged digest) or nothing', () => {
    const key = 'fcd_abcdefghijklmnopqrstuvwxyzABCDEF';
    const session = newSessionToken(bytes(7));
    expect(credentialDigest(key)).toBe(digestApiKey(key));
    expect(credentialDigest(session)).toBe(SESSION_CACHE_TAG + tokenDigest(session));
    expect(credentialDigest(newLinkToken(bytes(7)))).toBeUndefined();
    expect(credentialDigest('')).toBeUndefined();
  });
});

describe('portalLinkUrl', () => {
  it('is the path alone without a base URL, else the base (trailing slashes dropped) and the path', () => {
    expect(portalLinkUrl('fcdl_a-b_c', undefined)).toBe('/portal/login?token=fcdl_a-b_c');
    expect(portalLinkUrl('fcdl_a', 'https://api.example.com/')).toBe('https://api.example.com/portal/login?token=fcdl_a');
    expect(portalLinkUrl('fcdl_a', 'https://example.com/api')).toBe('https://example.com/api/portal/login?token=fcdl_a');
  });
});
