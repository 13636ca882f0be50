import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { AppError, installHttpConventions } from '@fcd/service-kit';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PORTAL_CSP, registerPortalStatic } from '../src/portal/static';

/**
 * src/portal/static.ts in-process, over a built portal written here: the page for each UI route
 * with the CSP and no-cache, the hashed assets with a year's immutable caching (gzip when asked),
 * and the 404 envelope for anything else, and for every path when the portal is not built.
 */

const dir = mkdtempSync(join(tmpdir(), 'portal-static-'));
const SCRIPT = 'main.ABCD1234.js';
const STYLE = 'styles.EFGH5678.css';
const scriptBody = `console.log(${JSON.stringify('x'.repeat(2000))});\n`;
let app: FastifyInstance;
let unbuilt: FastifyInstance;

async function appOver(options: { dir?: string }): Promise<FastifyInstance> {
  const a = Fastify({ logger: false });
  installHttpConventions(a);
  registerPortalStatic(a, options);
  // As the gateway's app does: no route, the 404 envelope.
  a.setNotFoundHandler(async () => {
    throw new AppError('NOT_FOUND', 'No route.');
  });
  await a.ready();
  return a;
}

beforeAll(async () => {
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), `<!doctype html><script type="module" src="/portal/assets/${SCRIPT}"></script>`);
  writeFileSync(join(dir, 'assets', SCRIPT), scriptBody);
  writeFileSync(join(dir, 'assets', STYLE), 'body{margin:0}');
  writeFileSync(join(dir, 'assets', 'notes.txt'), 'not an asset');
  app = await appOver({ dir });
  unbuilt = await appOver({ dir: join(dir, 'missing') });
});

afterAll(async () => {
  await app?.close();
  await unbuilt?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the portal page', () => {
  it.each(['/portal', '/portal/', '/portal/usage', '/portal/keys', '/portal/webhooks', '/portal/webhooks/wh_1', '/portal/events'])(
    'GET %s: index.html with the CSP, no-cache, nosniff and no referrer',
    async (url) => {
      const res = await app.inject({ url });
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe(`<!doctype html><script type="module" src="/portal/assets/${SCRIPT}"></script>`);
      expect({
        type: res.headers['content-type'],
        csp: res.headers['content-security-policy'],
        cache: res.headers['cache-control'],
        nosniff: res.headers['x-content-type-options'],
        referrer: res.headers['referrer-policy'],
      }).toEqual({ type: 'text/html; charset=utf-8', csp: PORTAL_CSP, cache: 'no-cache', nosniff: 'nosniff', referrer: 'no-referrer' });
    },
  );

  it('has the strict policy: only its own origin, nothing inline, no framing', () => {
    expect(PORTAL_CSP).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
  });
});

describe('the portal assets', () => {
  it('serves a hashed script and stylesheet for a year, immutable, gzipped when accepted', async () => {
    const plain = await app.inject({ url: `/portal/assets/${SCRIPT}` });
    expect([plain.statusCode, plain.headers['content-type'], plain.headers['cache-control'], plain.headers['content-encoding']]).toEqual([
      200,
      'text/javascript; charset=utf-8',
      'public, max-age=31536000, immutable',
      undefined,
    ]);
    expect(plain.body).toBe(scriptBody);
    expect(plain.headers['content-security-policy']).toBeUndefined();
    const gzipped = await app.inject({ url: `/portal/assets/${SCRIPT}`, headers: { 'accept-encoding': 'gzip, br' } });
    expect([gzipped.headers['content-encoding'], gzipped.headers.vary]).toEqual(['gzip', 'accept-encoding']);
    expect(gunzipSync(gzipped.rawPayload).toString('utf8')).toBe(scriptBody);
    const style = await app.inject({ url: `/portal/assets/${STYLE}`, headers: { 'accept-encoding': 'identity' } });
    expect([style.statusCode, style.headers['content-type'], style.body]).toEqual([200, 'text/css; charset=utf-8', 'body{margin:0}']);
  });

  it.each(['/portal/assets/main.ZZZZ9999.js', '/portal/assets/notes.txt', '/portal/assets/..%2Findex.html', '/portal/nope'])(
    'GET %s: the 404 envelope',
    async (url) => {
      const res = await app.inject({ url });
      expect([res.statusCode, res.json().error.code]).toEqual([404, 'NOT_FOUND']);
    },
  );

  it('answers 404 on every portal path when the portal is not built', async () => {
    for (const url of ['/portal/', '/portal/usage', `/portal/assets/${SCRIPT}`]) {
      const res = await unbuilt.inject({ url });
      expect([url, res.statusCode, res.json().error.code]).toEqual([url, 404, 'NOT_FOUND']);
    }
  });
});
