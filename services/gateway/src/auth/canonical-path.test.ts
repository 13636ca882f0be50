import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalTarget } from './canonical-path';

const ok = (url: string) => ({ ok: true, url });

describe('canonicalTarget', () => {
  it.each([
    ['/v1/facilities?state=TX', '/v1/facilities?state=TX'],
    ['/v1/%65xports/facilities', '/v1/exports/facilities'],
    ['/%76%31/facilities', '/v1/facilities'],
    ['/v1/%45xports/facilities', '/v1/Exports/facilities'],
    ['/v1/webhook%73', '/v1/webhooks'],
    ['/v1/webhook%6A', '/v1/webhookj'],
    ['/v1/webhook%6a', '/v1/webhookj'],
    ['/v1/a%2D%2e%5F%7e', '/v1/a-._~'],
    ['/v1/facilities/a%20b%c3%a9', '/v1/facilities/a%20b%C3%A9'],
    ['/v1/facilities/', '/v1/facilities/'],
    ['/v1/facilities/%65?q=%2F%2e//', '/v1/facilities/e?q=%2F%2e//'],
    ['/.well-known/x', '/.well-known/x'],
    ['/v1/..x/.y', '/v1/..x/.y'],
    ['http://127.0.0.1:8080/v1/facilities?limit=1', '/v1/facilities?limit=1'],
    ['HTTPS://user@example.com/v1/%65vents', '/v1/events'],
    ['http://example.com', '/'],
    ['http://example.com?x=1', '/?x=1'],
    ['/', '/'],
  ])('%s → %s', (raw, url) => {
    expect(canonicalTarget(raw)).toEqual(ok(url));
  });

  it.each([
    ['/v1//facilities', 'the path has an empty segment (//)'],
    ['//v1/facilities', 'the path has an empty segment (//)'],
    ['/v1/./facilities', 'the path has a dot segment (/./ or /../)'],
    ['/v1/webhooks/../exports/facilities', 'the path has a dot segment (/./ or /../)'],
    ['/v1/%2e%2E/exports/facilities', 'the path has a dot segment (/./ or /../)'],
    ['/v1/facilities/.', 'the path has a dot segment (/./ or /../)'],
    ['/v1%2Ffacilities', 'the path has an encoded slash (%2F)'],
    ['/v1%2ffacilities', 'the path has an encoded slash (%2F)'],
    ['/v1/facilities%zz', 'a percent-encoded sequence does not decode'],
    ['/v1/facilities%6', 'a percent-encoded sequence does not decode'],
    ['/v1/exports/facilities#x', 'the request target has a fragment (#)'],
    ['*', 'the request target is neither a path nor an absolute http(s) URL'],
    ['ftp://host/v1/facilities', 'the request target is neither a path nor an absolute http(s) URL'],
    ['http:/v1/facilities', 'the request target is neither a path nor an absolute http(s) URL'],
    ['http://example.com//v1/facilities', 'the path has an empty segment (//)'],
  ])('%s is refused: %s', (raw, reason) => {
    expect(canonicalTarget(raw)).toEqual({ ok: false, reason });
  });

  const segment = fc.stringMatching(/^[A-Za-z0-9\-_~][A-Za-z0-9\-._~]{0,11}$/).filter((s) => s !== '.' && s !== '..');
  const canonicalPath = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => `/${s.join('/')}`);

  it('decodes any mix of percent-encoded unreserved characters, in either case, back to the path', () => {
    fc.assert(
      fc.property(canonicalPath, fc.infiniteStream(fc.constantFrom('keep', 'lower', 'upper')), (path, choices) => {
        const encoded = [...path]
          .map((c) => {
            const choice = choices.next().value;
            if (c === '/' || choice === 'keep') return c;
            const hex = c.charCodeAt(0).toString(16).padStart(2, '0');
            return `%${choice === 'upper' ? hex.toUpperCase() : hex}`;
          })
          .join('');
        expect(canonicalTarget(encoded)).toEqual(ok(path));
        expect(canonicalTarget(`http://h${encoded}?a=%2F`)).toEqual(ok(`${path}?a=%2F`));
      }),
    );
  });

  it('is idempotent, and its output never has an encoded slash, an empty or a dot segment', () => {
    const char = fc.constantFrom('a', 'Z', '0', '.', '/', '%', '2', 'f', 'F', 'e', '-', '~', '?', '#', ' ');
    fc.assert(
      fc.property(fc.array(char, { maxLength: 24 }), (chars) => {
        const result = canonicalTarget(`/${chars.join('')}`);
        if (!result.ok) return;
        expect(canonicalTarget(result.url)).toEqual(result);
        const path = result.url.split('?')[0] as string;
        expect(path).not.toMatch(/%2F|\/\/|(^|\/)\.\.?(\/|$)/i);
      }),
    );
  });
});
