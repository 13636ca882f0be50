import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError, unauthorized } from './errors';
import { type AccountClaims, INTERNAL_AUTH_HEADER, type InternalAuth, PRO_TIER_RANK, requestTarget } from './internal-auth';

/** A domain service's side of the gateway's signed account header (`gatewayAccounts`). */
export interface GatewayAccounts {
  /**
   * onRequest hook, before any body is read: the request must carry the header signed for this
   * service, this method and this path with its query, else 401 UNAUTHORIZED. Its log lines then
   * carry the account_id.
   */
  readonly verify: onRequestHookHandler;
  /**
   * onRequest hook after `verify`: Pro and above only, checked again here whatever the gateway
   * decided (its tier gate is one of two walls). A lower tier gets the gateway's own 403 FORBIDDEN,
   * with `details.required_tier` and `details.tier`; `feature` names what is refused, in the plural.
   */
  requirePro(feature: string): onRequestHookHandler;
  /** The verified claims of a request `verify` passed (401 UNAUTHORIZED for any other). */
  claims(request: FastifyRequest): AccountClaims;
}

/**
 * The verified caller of each request, for the services behind the gateway (facility, webhook).
 * The hooks never wait, so they take `done` (installHttpConventions' rule: no promise per request).
 * Claims are kept in a WeakMap rather than a request decoration: no global type augmentation of
 * Fastify's request.
 */
export function gatewayAccounts(auth: InternalAuth, audience: string): GatewayAccounts {
  const claimsOf = new WeakMap<FastifyRequest, AccountClaims>();
  return {
    verify: (request, _reply, done) => {
      const claims = auth.verify(request.headers[INTERNAL_AUTH_HEADER], requestTarget(request, audience));
      if (!claims) return done(unauthorized());
      claimsOf.set(request, claims);
      request.log = request.log.child({ account_id: claims.account_id });
      done();
    },
    requirePro: (feature) => (request, _reply, done) => {
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
    },
    claims: (request) => {
      const claims = claimsOf.get(request);
      if (!claims) throw unauthorized();
      return claims;
    },
  };
}
