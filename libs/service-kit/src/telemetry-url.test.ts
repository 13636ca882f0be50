import { describe, expect, it } from 'vitest';
import { redactedUrlAttributes } from './telemetry';

describe('redactedUrlAttributes', () => {
  it('keeps scheme, host and port; the path and the query become REDACTED', () => {
    expect(redactedUrlAttributes('https://hooks.example.com:8443', '/services/T0/B0/s3cr3t?token=abc&x=1')).toEqual({
      'url.full': 'https://hooks.example.com:8443/REDACTED?REDACTED',
      'url.path': '/REDACTED',
      'url.query': '?REDACTED',
    });
  });

  it('says nothing of a query there is none of, and drops the default port', () => {
    expect(redactedUrlAttributes('https://hooks.example.com:443', '/fcd')).toEqual({
      'url.full': 'https://hooks.example.com/REDACTED',
      'url.path': '/REDACTED',
      'url.query': '',
    });
  });

  it('gives no URL attributes for a request it cannot parse', () => {
    expect(redactedUrlAttributes('not a url', '/x')).toEqual({});
  });
});
