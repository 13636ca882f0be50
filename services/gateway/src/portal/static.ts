import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { AppError } from '@fcd/service-kit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PAGE_SECURITY_HEADERS } from '../http/page-headers';

/**
 * The customer portal's page and assets (docs/portal.md): the UI built by
 * services/gateway/portal/build.mjs into dist/portal/ (index.html and assets/<name>.<hash>.js|css),
 * read into memory once at start-up. The page is served for /portal and each of the UI's own
 * routes with a strict CSP and `no-cache`; the hashed assets with a year's immutable caching.
 * Sessions, one-time links and the cookie are the portal's other routes (src/portal/).
 */

/** The page's Content-Security-Policy: nothing inline, nothing from another origin. */
export const PORTAL_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

/** The paths the UI routes itself (services/gateway/portal/src/router.ts): each gets the page. */
const PAGE_PATHS = ['/portal', '/portal/', '/portal/usage', '/portal/keys', '/portal/webhooks', '/portal/webhooks/:id', '/portal/events'];

const ASSET_NAME = /^[a-z][a-z0-9-]*\.[A-Z0-9]{8,}\.(js|css)$/;
const TYPES = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' } as const;

interface Asset {
  type: string;
  body: Buffer;
  gzipped: Buffer;
}

interface Built {
  page: Buffer;
  assets: Map<string, Asset>;
}

/** dist/portal beside the running bundle (dist/main.js), else the one the build wrote (running from src/). */
function builtDir(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  return [resolve(here, 'portal'), resolve(here, '../../dist/portal')].find((dir) => existsSync(join(dir, 'index.html')));
}

function loadBuilt(dir: string): Built {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(join(dir, 'assets'))) {
    const match = ASSET_NAME.exec(name);
    if (!match) continue;
    const body = readFileSync(join(dir, 'assets', name));
    assets.set(name, { type: TYPES[match[1] as keyof typeof TYPES], body, gzipped: gzipSync(body) });
  }
  return { page: readFileSync(join(dir, 'index.html')), assets };
}

const acceptsGzip = (request: FastifyRequest) => /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));

/**
 * Registers GET /portal (and the UI's routes) and GET /portal/assets/:file, from `dir` (default:
 * the built dist/portal). Outside /v1: not authenticated, not counted.
 */
export function registerPortalStatic(app: FastifyInstance, options: { dir?: string } = {}): void {
  const dir = options.dir ?? builtDir();
  const built = dir && existsSync(join(dir, 'index.html')) ? loadBuilt(dir) : undefined;
  if (!built) app.log.warn({ msg: 'the customer portal is not built (npm run build -w @fcd/gateway): /portal answers 404' });
  const missing = (request: FastifyRequest): never => {
    throw new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}.`);
  };

  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!built) return missing(request);
    return reply
      .headers(PAGE_SECURITY_HEADERS)
      .header('content-security-policy', PORTAL_CSP)
      .header('cache-control', 'no-cache')
      .type('text/html; charset=utf-8')
      .send(built.page);
  };
  for (const path of PAGE_PATHS) app.get(path, page);

  app.get<{ Params: { file: string } }>('/portal/assets/:file', async (request, reply) => {
    const asset = built?.assets.get(request.params.file);
    if (!asset) return missing(request);
    // A hashed name never changes content: cached for a year, never revalidated.
    reply
      .headers(PAGE_SECURITY_HEADERS)
      .header('cache-control', 'public, max-age=31536000, immutable')
      .header('vary', 'accept-encoding')
      .type(asset.type);
    if (!acceptsGzip(request)) return reply.send(asset.body);
    return reply.header('content-encoding', 'gzip').send(asset.gzipped);
  });
}
