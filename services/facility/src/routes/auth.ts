import { createHash, timingSafeEqual } from 'node:crypto';
import { AppError, INTERNAL_AUTH_HEADER, type InternalAuth, unauthorized } from '@fcd/service-kit';
import type { onRequestAsyncHookHandler } from 'fastify';

/**
 * Requests must carry the gateway's signed account header (x-fcd-account).
 * Runs on onRequest, before any body is read.
 */
export function requireGatewayAccount(auth: InternalAuth): onRequestAsyncHookHandler {
  return async (request) => {
    const claims = auth.verify(request.headers[INTERNAL_AUTH_HEADER]);
    if (!claims) throw unauthorized();
    request.log = request.log.child({ account_id: claims.account_id });
  };
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Requests must carry `Authorization: Bearer <token>`; compared in constant time. */
export function requireBearerToken(token: string): onRequestAsyncHookHandler {
  const expected = digest(token);
  return async (request) => {
    const header = request.headers.authorization;
    const given = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7).trim() : '';
    if (!given || !timingSafeEqual(digest(given), expected)) {
      throw new AppError('UNAUTHORIZED', 'A valid ingestion token is required. Send it as Authorization: Bearer <token>.');
    }
  };
}
