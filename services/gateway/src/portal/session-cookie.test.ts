import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { crossSite, csrfRefusal, csrfTokenOf, overTls, sessionTokenOf } from './session-cookie';

const TOKEN = `fcds_${'a'.repeat(43)}`;

function request(method: string, headers: Record<string, string>, protocol: 'http' | 'https' = 'http'): FastifyRequest {
  return { method, headers: { host: 'api.example.com', ...headers }, protocol } as unknown as FastifyRequest;
}

describe('the session cookie', () => {
  it('is read only when it holds a session token', () => {
    expect(sessionTokenOf(request('GET', { cookie: `a=b; fcd_portal=${TOKEN}` }))).toBe(TOKEN);
    expect(sessionTokenOf(request('GET', { cookie: 'fcd_portal=fcd_abc' }))).toBeUndefined();
    expect(sessionTokenOf(request('GET', {}))).toBeUndefined();
  });

  it('is Secure over a TLS socket or when the ingress forwarded https', () => {
    expect(overTls(request('GET', {}, 'https'))).toBe(true);
    expect(overTls(request('GET', { 'x-forwarded-proto': 'https' }))).toBe(true);
    expect(overTls(request('GET', { 'x-forwarded-proto': 'HTTPS, http' }))).toBe(true);
    expect(overTls(request('GET', { 'x-forwarded-proto': 'http' }))).toBe(false);
    expect(overTls(request('GET', {}))).toBe(false);
  });
});

describe('CSRF', () => {
  it('derives a token per session', () => {
    expect(csrfTokenOf(TOKEN)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(csrfTokenOf(TOKEN)).not.toBe(csrfTokenOf(`fcds_${'b'.repeat(43)}`));
  });

  it('tells a cross-site request by Sec-Fetch-Site or an Origin of another host', () => {
    expect(crossSite(request('POST', {}))).toBe(false);
    expect(crossSite(request('POST', { origin: 'https://api.example.com' }))).toBe(false);
    expect(crossSite(request('POST', { origin: 'https://API.example.com', 'sec-fetch-site': 'same-origin' }))).toBe(false);
    expect(crossSite(request('POST', { origin: 'https://evil.example' }))).toBe(true);
    expect(crossSite(request('POST', { origin: 'https://api.example.com:8443' }))).toBe(true);
    expect(crossSite(request('POST', { origin: 'null' }))).toBe(true);
    expect(crossSite(request('POST', { 'sec-fetch-site': 'cross-site' }))).toBe(true);
  });

  it('lets safe methods through and asks writes for the token from this origin', () => {
    const csrf = csrfTokenOf(TOKEN);
    expect(csrfRefusal(request('GET', { origin: 'https://evil.example' }), TOKEN)).toBeUndefined();
    expect(csrfRefusal(request('POST', { 'x-csrf-token': csrf }), TOKEN)).toBeUndefined();
    const refusedHeaders: Array<Record<string, string>> = [
      {},
      { 'x-csrf-token': `${csrf}x` },
      { 'x-csrf-token': csrf, origin: 'https://evil.example' },
    ];
    for (const headers of refusedHeaders) {
      const refused = csrfRefusal(request('DELETE', headers), TOKEN);
      expect([refused?.code, refused?.status, refused?.details]).toEqual(['FORBIDDEN', 403, { reason: 'csrf' }]);
    }
  });
});
