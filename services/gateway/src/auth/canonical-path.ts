/**
 * The one canonical form of a request target, computed once before routing (Fastify's `rewriteUrl`),
 * so that the router, the tier gates, the metering and the forwarded path all see the same path
 * (docs/api.md, "Path normalisation"):
 *
 * - an absolute-form target (`http://host/v1/facilities`) becomes its path and query;
 * - percent-encoded unreserved characters (ALPHA / DIGIT / `-` `.` `_` `~`, `%xx` or `%XX`) are
 *   decoded; every other percent-encoding is kept, with upper-case hex digits;
 * - malformed: an encoded slash (`%2F`), a dot segment (`.` or `..`, encoded or not), an empty
 *   segment (`//`) other than a trailing slash, a fragment (`#`), a `%` not followed by two hex
 *   digits, or a target that is neither a path nor an absolute http(s) URL.
 *
 * The query is left as sent: only the path decides routing and authorization.
 */
import type { IncomingMessage } from 'node:http';
import { AppError } from '@fcd/service-kit';
import type { onRequestHookHandler } from 'fastify';

export type CanonicalTarget = { ok: true; url: string } | { ok: false; reason: string };

const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const HEX = /^[0-9A-Fa-f]{2}$/;

/** The path and query of the target, or undefined when it is neither origin-form nor absolute http(s). */
function originForm(target: string): string | undefined {
  if (target.startsWith('/')) return target;
  const authority = ABSOLUTE_FORM.exec(target);
  if (!authority) return undefined;
  const rest = target.slice(authority[0].length);
  if (rest === '' || rest.startsWith('?')) return `/${rest}`;
  return rest.startsWith('/') ? rest : undefined;
}

/** The path with unreserved characters decoded and other escapes in upper case; a reason when malformed. */
function decodeUnreserved(path: string): { ok: true; path: string } | { ok: false; reason: string } {
  let out = '';
  let from = 0;
  for (let i = path.indexOf('%'); i !== -1; i = path.indexOf('%', from)) {
    const hex = path.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return { ok: false, reason: 'a percent-encoded sequence does not decode' };
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    if (char === '/') return { ok: false, reason: 'the path has an encoded slash (%2F)' };
    out += path.slice(from, i) + (UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`);
    from = i + 3;
  }
  return { ok: true, path: out + path.slice(from) };
}

/** A reason when a segment of the (decoded) path is empty (other than a trailing slash) or a dot segment. */
function segmentProblem(path: string): string | undefined {
  const segments = path.split('/').slice(1);
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i];
    if (segment === '.' || segment === '..') return 'the path has a dot segment (/./ or /../)';
    if (segment === '' && i < segments.length - 1) return 'the path has an empty segment (//)';
  }
  return undefined;
}

/** Origin-form, no escape, fragment, empty or dot segment in the path: already canonical (the common case). */
function plainly(raw: string): boolean {
  const q = raw.indexOf('?');
  const path = q === -1 ? raw : raw.slice(0, q);
  return raw.startsWith('/') && !/%|#|\/\/|\/\./.test(path);
}

/** The canonical request target (path and query) of a raw one, or why it is refused. */
export function canonicalTarget(raw: string): CanonicalTarget {
  if (plainly(raw)) return { ok: true, url: raw };
  const target = originForm(raw);
  if (target === undefined) return { ok: false, reason: 'the request target is neither a path nor an absolute http(s) URL' };
  const q = target.indexOf('?');
  const rawPath = q === -1 ? target : target.slice(0, q);
  const query = q === -1 ? '' : target.slice(q);
  if (rawPath.includes('#')) return { ok: false, reason: 'the request target has a fragment (#)' };
  const decoded = decodeUnreserved(rawPath);
  if (!decoded.ok) return decoded;
  const problem = segmentProblem(decoded.path);
  if (problem) return { ok: false, reason: problem };
  return { ok: true, url: decoded.path + query };
}

/**
 * Fastify's `rewriteUrl` and the hook that refuses what it could not make canonical. The router
 * sees the canonical target (and `request.url` is it; `request.originalUrl` keeps the raw one). A
 * malformed target is routed as `/`, never as itself, and answered 400 BAD_REQUEST by the first
 * hook, before authentication: it is not counted (docs/api.md, "Path normalisation").
 */
export function canonicalRouting(): { rewriteUrl: (req: IncomingMessage) => string; refuseMalformed: onRequestHookHandler } {
  const malformed = new WeakMap<IncomingMessage, string>();
  return {
    rewriteUrl(req) {
      const target = canonicalTarget(req.url ?? '/');
      if (target.ok) return target.url;
      malformed.set(req, target.reason);
      return '/';
    },
    refuseMalformed(request, _reply, done) {
      const reason = malformed.get(request.raw);
      done(reason === undefined ? undefined : new AppError('BAD_REQUEST', `The request URL is not valid: ${reason}.`));
    },
  };
}
