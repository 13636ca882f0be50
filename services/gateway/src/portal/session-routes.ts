import { create } from '@bufbuild/protobuf';
import fastifyCookie from '@fastify/cookie';
import { fromGrpcError, type TypedClient } from '@fcd/grpc';
import {
  CreateSessionFromKeyRequestSchema,
  GetSessionRequestSchema,
  type PortalService,
  type PortalSession,
  RedeemLinkRequestSchema,
  RevokeSessionRequestSchema,
} from '@fcd/proto';
import { AppError } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clearSessionCookie, crossSite, csrfRefusal, csrfTokenOf, sessionTokenOf, setSessionCookie } from './session-cookie';

/**
 * The portal's sign-in routes (docs/api.md, "Portal"): outside /v1, so neither counted nor limited.
 * The usage service's PortalService keeps the sessions and links; the gateway only carries the
 * token between it and the cookie. Every answer is `no-store`.
 */
export interface PortalSessionDeps {
  portal: TypedClient<typeof PortalService>;
}

const SESSION_MESSAGE = 'Sign in to the portal first: no live portal session (the fcd_portal cookie).';
const LOGIN_FAILED = '/portal/?error=link';

const SessionOut = Type.Object({
  account_id: Type.String(),
  tier: Type.String(),
  csrf_token: Type.String(),
  expires_at: Type.String(),
});

const sessionOut = (s: PortalSession | undefined, token: string) => {
  if (!s)
    throw new AppError('SERVICE_UNAVAILABLE', 'The service is temporarily unavailable (usage). Retry after 1 s.', { retryAfterSeconds: 1 });
  return { account_id: s.accountId, tier: s.tier, csrf_token: csrfTokenOf(token), expires_at: s.expiresAt };
};

async function call<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw fromGrpcError(err, 'usage');
  }
}

function noStore(reply: FastifyReply): void {
  reply.header('cache-control', 'no-store');
  reply.header('referrer-policy', 'no-referrer');
}

/** GET /portal/login?token=…: redeems the link; 303 to /portal/ signed in, or to /portal/?error=link. */
function registerLogin(app: FastifyInstance, deps: PortalSessionDeps): void {
  app.get(
    '/portal/login',
    { schema: { querystring: Type.Object({ token: Type.Optional(Type.String({ maxLength: 200 })) }) } },
    async (request, reply) => {
      noStore(reply);
      const token = (request.query as { token?: string }).token ?? '';
      let opened: { session?: PortalSession; sessionToken: string };
      try {
        opened = await deps.portal.unary.redeemLink(create(RedeemLinkRequestSchema, { token }));
      } catch (err) {
        const e = fromGrpcError(err, 'usage');
        if (e.code !== 'UNAUTHORIZED') throw e;
        return reply.code(303).header('location', LOGIN_FAILED).send();
      }
      setSessionCookie(request, reply, opened.sessionToken, sessionOut(opened.session, opened.sessionToken).expires_at);
      return reply.code(303).header('location', '/portal/').send();
    },
  );
}

/** The session of the request's cookie, or 401. */
function sessionToken(request: FastifyRequest): string {
  const token = sessionTokenOf(request);
  if (!token) throw new AppError('UNAUTHORIZED', SESSION_MESSAGE);
  return token;
}

function registerSession(app: FastifyInstance, deps: PortalSessionDeps): void {
  app.post(
    '/portal/session',
    {
      schema: {
        body: Type.Object({ api_key: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
        response: { 200: SessionOut },
      },
    },
    async (request, reply) => {
      noStore(reply);
      // Signing in from another site's page (login CSRF) is refused like a cross-site write.
      if (crossSite(request))
        throw new AppError('FORBIDDEN', 'Sign in from the portal itself, not from another site.', { details: { reason: 'csrf' } });
      const apiKey = (request.body as { api_key: string }).api_key;
      const opened = await call(() => deps.portal.unary.createSessionFromKey(create(CreateSessionFromKeyRequestSchema, { apiKey })));
      const out = sessionOut(opened.session, opened.sessionToken);
      setSessionCookie(request, reply, opened.sessionToken, out.expires_at);
      return out;
    },
  );
  app.get('/portal/session', { schema: { response: { 200: SessionOut } } }, async (request, reply) => {
    noStore(reply);
    const token = sessionToken(request);
    const found = await call(() => deps.portal.unary.getSession(create(GetSessionRequestSchema, { sessionToken: token })));
    return sessionOut(found.session, token);
  });
  app.delete('/portal/session', async (request, reply) => {
    noStore(reply);
    const token = sessionToken(request);
    const refused = csrfRefusal(request, token);
    if (refused) throw refused;
    await call(() => deps.portal.unary.revokeSession(create(RevokeSessionRequestSchema, { sessionToken: token })));
    clearSessionCookie(request, reply);
    return reply.code(204).send();
  });
}

/** The cookie plugin, GET /portal/login and /portal/session (GET, POST, DELETE). */
export function registerPortalSessionRoutes(app: FastifyInstance, deps: PortalSessionDeps): void {
  app.register(fastifyCookie);
  registerLogin(app, deps);
  registerSession(app, deps);
}
