import { INTERNAL_AUTH_HEADER, type InternalAuth, requestTarget, unauthorized } from '@fcd/service-kit';
import type { onRequestAsyncHookHandler } from 'fastify';

/** The name the facility service is signed for (the gateway's upstream name). */
const FACILITY_AUDIENCE = 'facility';

/**
 * Requests must carry the gateway's signed account header (x-fcd-account),
 * signed for this service, this method and this path with its query.
 * Runs on onRequest, before any body is read.
 */
export function requireGatewayAccount(auth: InternalAuth): onRequestAsyncHookHandler {
  return async (request) => {
    const claims = auth.verify(request.headers[INTERNAL_AUTH_HEADER], requestTarget(request, FACILITY_AUDIENCE));
    if (!claims) throw unauthorized();
    request.log = request.log.child({ account_id: claims.account_id });
  };
}
