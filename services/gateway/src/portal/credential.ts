import { AppError, UNAUTHORIZED_MESSAGE } from '@fcd/service-kit';
import type { FastifyRequest } from 'fastify';
import { csrfRefusal, sessionTokenOf } from './session-cookie';

/**
 * The credential a /v1 request is authorized with (auth/metering.ts): the X-API-Key header when
 * there is one (the cookie is then ignored, and no CSRF rule applies), else the portal session of
 * the `fcd_portal` cookie, whose writes must pass the CSRF rules (docs/api.md, "Portal"). Either
 * way the usage service resolves, limits and counts it the same (the session token travels in the
 * AuthorizeItem's api_key). A session token sent as X-API-Key is refused: a session is used only
 * through its cookie, where the CSRF rules hold.
 */
export function requestCredential(request: FastifyRequest): string | AppError {
  const header = request.headers['x-api-key'];
  if (header !== undefined) {
    const apiKey = typeof header === 'string' ? header : '';
    return apiKey === '' || apiKey.startsWith('fcds_') ? new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE) : apiKey;
  }
  const session = sessionTokenOf(request);
  if (session === undefined) return new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
  return csrfRefusal(request, session) ?? session;
}
