import {
  type AccountClaims,
  AppError,
  INTERNAL_AUTH_HEADER,
  type InternalAuth,
  PRO_TIER_RANK,
  requestTarget,
  unauthorized,
} from '@fcd/service-kit';
import type { FastifyRequest, onRequestHookHandler } from 'fastify';

/** The name the facility service is signed for (the gateway's upstream name). */
const FACILITY_AUDIENCE = 'facility';

/**
 * The verified claims of each request: a WeakMap rather than a request decoration, as in the
 * webhook service (no global type augmentation of Fastify's request).
 */
const claimsOf = new WeakMap<FastifyRequest, AccountClaims>();

/**
 * Requests must carry the gateway's signed account header (x-fcd-account), signed for this
 * service, this method and this path with its query. Runs on onRequest, before any body is read.
 * It never waits, so it takes `done` (the convention of installHttpConventions: no promise per
 * request).
 */
export function requireGatewayAccount(auth: InternalAuth): onRequestHookHandler {
  return (request, _reply, done) => {
    const claims = auth.verify(request.headers[INTERNAL_AUTH_HEADER], requestTarget(request, FACILITY_AUDIENCE));
    if (!claims) return done(unauthorized());
    claimsOf.set(request, claims);
    request.log = request.log.child({ account_id: claims.account_id });
    done();
  };
}

/**
 * Pro and above only: the signed claim's tier rank is checked again here, whatever the gateway
 * decided (its tier gate is one of two walls). A lower tier gets the gateway's own 403 FORBIDDEN,
 * with `details.required_tier` and `details.tier`. Runs after requireGatewayAccount.
 */
export function requireProTier(feature: string): onRequestHookHandler {
  return (request, _reply, done) => {
    const claims = claimsOf.get(request);
    if (!claims) return done(unauthorized());
    const rank = typeof claims.tier_rank === 'number' ? claims.tier_rank : 0;
    if (rank < PRO_TIER_RANK) {
      return done(
        new AppError('FORBIDDEN', `${feature} are available on the Pro tier and above. Upgrade the account to use them.`, {
          details: { required_tier: 'pro', tier: claims.tier },
        }),
      );
    }
    done();
  };
}
