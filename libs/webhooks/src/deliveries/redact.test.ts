import { describe, expect, it } from 'vitest';
import { REDACTED, redactHeaders } from './redact';

describe('redactHeaders', () => {
  it('replaces the values of Set-Cookie, Authorization, Proxy-Authorization and WWW-Authenticate, whatever their case, and keeps the names', () => {
    const headers = {
      'content-type': 'text/plain',
      'Set-Cookie': 'session=abc; HttpOnly, b=2',
      authorization: 'Bearer secret',
      'PROXY-AUTHORIZATION': 'Basic dXNlcjpwYXNz',
      'www-authenticate': 'Bearer realm="x"',
      'x-receiver': 'kept',
    };
    expect(redactHeaders(headers)).toEqual({
      'content-type': 'text/plain',
      'Set-Cookie': REDACTED,
      authorization: REDACTED,
      'PROXY-AUTHORIZATION': REDACTED,
      'www-authenticate': REDACTED,
      'x-receiver': 'kept',
    });
    expect(Object.keys(redactHeaders(headers))).toEqual(Object.keys(headers));
    expect(headers['Set-Cookie']).toBe('session=abc; HttpOnly, b=2'); // the input is not changed
    expect(REDACTED).toBe('[redacted]');
  });

  it('leaves other headers as they are, and null as null', () => {
    const headers = { 'x-cookie-count': '2', 'x-authorization-hint': 'none' };
    expect(redactHeaders(headers)).toBe(headers);
    expect(redactHeaders(null)).toBeNull();
  });
});
