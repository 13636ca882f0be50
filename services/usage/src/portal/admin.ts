import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { PortalStore } from './store';

/**
 * The sign-in link of a token: `<PUBLIC_BASE_URL>/portal/login?token=…`, or the path alone when
 * PUBLIC_BASE_URL is unset (the operator puts the gateway's address in front; docs/api.md, "Portal").
 */
export function portalLinkUrl(token: string, publicBaseUrl: string | undefined): string {
  const path = `/portal/login?token=${encodeURIComponent(token)}`;
  return publicBaseUrl ? publicBaseUrl.replace(/\/+$/, '') + path : path;
}

export interface PortalLinkDeps {
  portal: PortalStore;
  now: () => number;
  publicBaseUrl: string | undefined;
}

/** Mints a one-time sign-in link (10 minutes, one use); NOT_FOUND for an unknown account. */
export async function mintPortalLink(deps: PortalLinkDeps, accountId: string): Promise<{ url: string; expires_at: string }> {
  const { token, expiresAt } = await deps.portal.createLink(accountId, deps.now());
  return { url: portalLinkUrl(token, deps.publicBaseUrl), expires_at: new Date(expiresAt).toISOString() };
}

/** POST /admin/v1/accounts/:id/portal-links (admin API, behind its bearer token). */
export function registerPortalAdminRoutes(admin: FastifyInstance, deps: PortalLinkDeps): void {
  admin.post(
    '/admin/v1/accounts/:id/portal-links',
    {
      schema: {
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) }),
        response: { 201: Type.Object({ data: Type.Object({ url: Type.String(), expires_at: Type.String() }) }) },
      },
    },
    async (request, reply) => {
      const { id } = request.params as { id: string };
      return reply.code(201).send({ data: await mintPortalLink(deps, id) });
    },
  );
}
