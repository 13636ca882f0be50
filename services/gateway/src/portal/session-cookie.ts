import { createHash, hash, timingSafeEqual } from 'node:crypto';
import { AppError } from '@fcd/service-kit';
import { parseCookie } from 'cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * The portal's session cookie and its CSRF rules (docs/api.md, "Portal"; ADR 0016). The cookie
 * holds the session token (`fcds_…`, usage service's portal/tokens.ts): HttpOnly, so no script
 * reads it; SameSite=Strict, so no other site's page sends it; Secure when the request came over
 * TLS. The CSRF token is derived from the session token (SHA-256 under its own label): the gateway
 * checks it without state, and the page gets it only from GET /portal/session, which another
 * origin cannot read.
 */
const SESSION_COOKIE = 'fcd_portal';
/** 12 hours, the session's own lifetime (the usage service's SESSION_TTL_MS). */
const SESSION_MAX_AGE_SECONDS = 43_200;
const CSRF_HEADER = 'x-csrf-token';

const SESSION_TOKEN = /^fcds_[A-Za-z0-9_-]{43}$/;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function csrfTokenOf(sessionToken: string): string {
  return hash('sha256', `fcd-portal-csrf:${sessionToken}`, 'base64url');
}

/**
 * Over TLS: the socket itself (the gateway trusts no proxy for anything else), or an
 * X-Forwarded-Proto of https from the ingress that ended TLS. Trusting the header here is safe: it
 * can only add Secure, which restricts the cookie further (a client lying about it spoils its own cookie).
 */
export function overTls(request: FastifyRequest): boolean {
  if (request.protocol === 'https') return true;
  const forwarded = request.headers['x-forwarded-proto'];
  const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim().toLowerCase();
  return first === 'https';
}

/** Sets the session cookie; its Max-Age is the session's remaining life (12 h for a new one). */
export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, token: string, expiresAt: string): void {
  const left = Math.ceil((Date.parse(expiresAt) - Date.now()) / 1000);
  reply.setCookie(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'strict',
    path: '/',
    maxAge: Math.max(0, Math.min(SESSION_MAX_AGE_SECONDS, left)),
    secure: overTls(request),
  });
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', path: '/', secure: overTls(request) });
}

/** The session token of the request's cookie, when it has the session token's shape. */
export function sessionTokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  const token = parseCookie(header)[SESSION_COOKIE];
  return token !== undefined && SESSION_TOKEN.test(token) ? token : undefined;
}

/** A request another site made: Sec-Fetch-Site cross-site, or an Origin that is not this host's. */
export function crossSite(request: FastifyRequest): boolean {
  if (request.headers['sec-fetch-site'] === 'cross-site') return true;
  const origin = request.headers.origin;
  if (origin === undefined) return false;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return true; // "null" (a sandboxed or opaque origin) and anything unparsable
  }
  return host === '' || host.toLowerCase() !== String(request.headers.host ?? '').toLowerCase();
}

const sha256 = (value: string) => createHash('sha256').update(value).digest();
const refused = (message: string) => new AppError('FORBIDDEN', message, { details: { reason: 'csrf' } });

/**
 * Undefined when a cookie-authenticated request may go on: a safe method, or a write from this
 * origin carrying the session's X-CSRF-Token (compared in constant time); else the 403.
 */
export function csrfRefusal(request: FastifyRequest, sessionToken: string): AppError | undefined {
  if (SAFE_METHODS.has(request.method)) return undefined;
  if (crossSite(request)) return refused('A write signed in by the portal cookie must come from the portal itself, not from another site.');
  const sent = request.headers[CSRF_HEADER];
  // Digests of both, so the comparison takes the same time whatever the length sent.
  const same = typeof sent === 'string' && timingSafeEqual(sha256(sent), sha256(csrfTokenOf(sessionToken)));
  return same
    ? undefined
    : refused("A write signed in by the portal cookie needs the session's X-CSRF-Token header (GET /portal/session).");
}
