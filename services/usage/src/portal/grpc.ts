import { create } from '@bufbuild/protobuf';
import { addService, grpc, type ServiceImpl } from '@fcd/grpc';
import {
  CreateSessionFromKeyResponseSchema,
  GetSessionResponseSchema,
  PortalService,
  type PortalSession,
  PortalSessionSchema,
  RedeemLinkResponseSchema,
  RevokeSessionResponseSchema,
} from '@fcd/proto';
import { AppError } from '@fcd/service-kit';
import { isWellFormedKey } from '../domain/api-key';
import type { UsageMeter } from '../meter/index';
import type { UsageMetrics } from '../metrics';
import type { OpenedSession, PortalSessionView, PortalStore } from './store';
import { isLinkToken, isSessionToken } from './tokens';

const LINK_REFUSED = 'The sign-in link is not valid: it was already used, it expired, or it never existed. Ask for a new one.';
const KEY_REFUSED = 'The API key is missing, invalid, revoked or expired.';
const SESSION_REFUSED = 'The portal session is missing, expired or signed out.';

function toSession(s: PortalSessionView): PortalSession {
  return create(PortalSessionSchema, { accountId: s.accountId, tier: s.tier, expiresAt: new Date(s.expiresAt).toISOString() });
}

function opened(result: OpenedSession | undefined, refusal: string) {
  if (!result) throw new AppError('UNAUTHORIZED', refusal);
  return { session: toSession(result.session), sessionToken: result.token };
}

/**
 * PortalService (proto/usage/v1/portal.proto): sign-in by link or key, the session, sign-out. A
 * malformed token is refused without a query. Revoking drops the account's cached credentials on
 * every replica (`meter.keysChanged`), as a key revocation does, so the session stops working
 * everywhere at once (within the key cache TTL if the message is lost).
 */
function portalHandlers(portal: PortalStore, meter: UsageMeter): ServiceImpl<typeof PortalService> {
  return {
    async redeemLink(request) {
      if (!isLinkToken(request.token)) throw new AppError('UNAUTHORIZED', LINK_REFUSED);
      return create(RedeemLinkResponseSchema, opened(await portal.redeemLink(request.token, meter.now()), LINK_REFUSED));
    },
    async createSessionFromKey(request) {
      if (!isWellFormedKey(request.apiKey)) throw new AppError('UNAUTHORIZED', KEY_REFUSED);
      return create(CreateSessionFromKeyResponseSchema, opened(await portal.sessionFromKey(request.apiKey, meter.now()), KEY_REFUSED));
    },
    async getSession(request) {
      const session = isSessionToken(request.sessionToken) ? await portal.session(request.sessionToken, meter.now()) : undefined;
      if (!session) throw new AppError('UNAUTHORIZED', SESSION_REFUSED);
      return create(GetSessionResponseSchema, { session: toSession(session) });
    },
    async revokeSession(request) {
      if (isSessionToken(request.sessionToken)) {
        const accountId = await portal.revoke(request.sessionToken, meter.now());
        if (accountId) await meter.keysChanged(accountId);
      }
      return create(RevokeSessionResponseSchema, {});
    },
  };
}

/** Serves PortalService on the usage gRPC server, with the same RED metrics as UsageService's unary calls. */
export function addPortalService(server: grpc.Server, portal: PortalStore, meter: UsageMeter, metrics: UsageMetrics): void {
  addService(server, PortalService, portalHandlers(portal, meter), {
    onUnary: (method, code, seconds) => {
      const labels = { route: method, method: 'grpc', status: grpc.status[code] ?? String(code) };
      metrics.requestDuration.observe(labels, seconds);
      metrics.requestsTotal.inc(labels);
    },
  });
}
