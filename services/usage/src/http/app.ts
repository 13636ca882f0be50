import {
  AppError,
  baseFastifyOptions,
  type Check,
  type Clock,
  type HttpServerSettings,
  installHttpConventions,
  registerHealthRoutes,
  requireBearerToken,
  type ServiceMetrics,
  systemClock,
} from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { type BillingHttpDeps, registerBillingRoutes } from '../billing/admin-routes';
import type { KeyCache } from '../domain/key-cache';
import { type PortalLinkDeps, registerPortalAdminRoutes } from '../portal/admin';
import type { AccountStore } from '../store/accounts';
import { registerAdminKeyRoutes } from './admin-keys';

export interface UsageHttpDeps {
  logger: Logger;
  metrics: ServiceMetrics;
  accounts: AccountStore;
  cache: KeyCache;
  /**
   * Drops an account's cached keys on every replica (KeyInvalidation.publish) after a revocation or
   * a tier change; without it, only this replica's cache (the others follow within its TTL).
   */
  keysChanged?: (accountId: string) => Promise<void>;
  checks: Record<string, Check>;
  /** Checks that do not make the service unready (redis, when fail-open is enabled). */
  optionalChecks?: string[];
  adminToken: string | undefined;
  /** The time of the operator's key changes (their expiries and audit entries); the system clock by default. */
  clock?: Clock;
  isShuttingDown: () => boolean;
  /** Timeouts and connection cap of the HTTP server. */
  http?: HttpServerSettings;
  /** The portal's one-time sign-in links (POST /admin/v1/accounts/:id/portal-links). */
  portalLinks?: PortalLinkDeps;
  /** Billing close and statements (billing/admin-routes.ts). */
  billing?: BillingHttpDeps;
}

const AccountOut = Type.Object({
  id: Type.String(),
  name: Type.String(),
  tier: Type.String(),
  daily_limit: Type.Integer(),
  created_at: Type.String(),
});
const accountOut = (a: { id: string; name: string; tier: string; dailyLimit: number; createdAt: string }) => ({
  id: a.id,
  name: a.name,
  tier: a.tier,
  daily_limit: a.dailyLimit,
  created_at: a.createdAt,
});
/** Create, list and change accounts (admin API). */
function registerAccountRoutes(admin: FastifyInstance, deps: UsageHttpDeps): void {
  admin.post(
    '/admin/v1/accounts',
    {
      schema: {
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 200 }),
            tier: Type.String({ minLength: 1 }),
            daily_limit: Type.Optional(Type.Integer({ minimum: 1 })),
          },
          { additionalProperties: false },
        ),
        response: { 201: Type.Object({ data: AccountOut }) },
      },
    },
    async (request, reply) => {
      const body = request.body as { name: string; tier: string; daily_limit?: number };
      const account = await deps.accounts.createAccount({ name: body.name, tier: body.tier, dailyLimit: body.daily_limit });
      return reply.code(201).send({ data: accountOut(account) });
    },
  );
  admin.get('/admin/v1/accounts', { schema: { response: { 200: Type.Object({ data: Type.Array(AccountOut) }) } } }, async () => ({
    data: (await deps.accounts.listAccounts()).map(accountOut),
  }));
  admin.patch(
    '/admin/v1/accounts/:id',
    {
      schema: {
        params: Type.Object({ id: Type.String() }),
        body: Type.Object(
          { tier: Type.String({ minLength: 1 }), daily_limit: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])) },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ data: AccountOut }) },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const body = request.body as { tier: string; daily_limit?: number | null };
      const account = await deps.accounts.setTier(id, body.tier, body.daily_limit);
      await keysChanged(deps, id);
      return { data: accountOut(account) };
    },
  );
}

/** Every replica's cache, where the service publishes key changes; this one's otherwise. */
async function keysChanged(deps: UsageHttpDeps, accountId: string): Promise<void> {
  if (deps.keysChanged) await deps.keysChanged(accountId);
  else deps.cache.evictAccount(accountId);
}

/** Health endpoints and the token-protected internal admin API (same operations as the CLI). */
export function buildUsageHttpApp(deps: UsageHttpDeps): FastifyInstance {
  const app = Fastify(baseFastifyOptions(deps.logger, deps.http));
  installHttpConventions(app, { metrics: deps.metrics });

  registerHealthRoutes(app, { checks: deps.checks, isShuttingDown: deps.isShuttingDown, optional: deps.optionalChecks ?? [] });

  app.register(async (admin) => {
    admin.addHook(
      'onRequest',
      requireBearerToken(deps.adminToken, { message: 'A valid admin token is required in the Authorization header.' }),
    );
    registerAccountRoutes(admin, deps);
    if (deps.portalLinks) registerPortalAdminRoutes(admin, deps.portalLinks);
    if (deps.billing) registerBillingRoutes(admin, deps.billing);
    registerAdminKeyRoutes(admin, {
      accounts: deps.accounts,
      now: () => (deps.clock ?? systemClock).now(),
      keysChanged: (id) => keysChanged(deps, id),
    });
  });

  app.setNotFoundHandler(async (request) => {
    throw new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}.`);
  });
  return app;
}
