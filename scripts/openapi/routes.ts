/**
 * The public routes and their schemas, collected from the services' route plugins: the facility
 * and webhook plugins are registered on a bare Fastify instance with inert dependencies (nothing
 * is called while routes register; any access to a dependency throws), and an onRoute hook
 * collects each route's schema. The gateway's own routes (the usage report, the exports)
 * contribute their exported TypeBox schemas. Only the routes of the gateway's table
 * (PUBLIC_ROUTES) are kept, under the gateway's parameter names.
 */
import Fastify from 'fastify';
import { ExportPublicQuery } from '../../services/facility/src/routes/exports';
import { publicRoutes as facilityRoutes } from '../../services/facility/src/routes/public';
import { CaseSchema, FacilitySchema, ViolationSchema } from '../../services/facility/src/routes/schemas';
import { sourcesRoutes } from '../../services/facility/src/routes/sources';
import {
  AuditLogQuery,
  AuditLogResponse,
  DailyUsageQuery,
  DailyUsageResponse,
} from '../../services/gateway/src/routes/account-history-schema';
import {
  CreatedKeyResponse,
  CreateKeyBody,
  KeyListResponse,
  KeyParams,
  KeyResponse,
  RenameKeyBody,
  RolledKeyResponse,
  RollKeyBody,
} from '../../services/gateway/src/routes/account-keys-schema';
import { StatementsResponse } from '../../services/gateway/src/routes/account-statements';
import { PUBLIC_ROUTES } from '../../services/gateway/src/routes/table';
import { NoQuery, UsageResponseSchema } from '../../services/gateway/src/routes/usage-schema';
import { eventRoutes } from '../../services/webhook/src/routes/events';
import { webhookRoutes } from '../../services/webhook/src/routes/webhooks';

export interface CollectedRoute {
  method: string;
  /** Path in the gateway table's spelling, e.g. /v1/facilities/:facility_id. */
  path: string;
  schema: { querystring?: unknown; params?: unknown; body?: unknown; response?: Record<string, unknown> };
}

/** An object whose every property access throws: proves route registration calls nothing. */
function inert(name: string): never {
  return new Proxy(
    {},
    {
      get(_t, prop) {
        throw new Error(`openapi: ${name}.${String(prop)} was used while registering routes`);
      },
    },
  ) as never;
}

const shape = (url: string) => url.replace(/:[^/]+/g, ':');

/** The documented operations: table routes that a service registers with a handler, under the table's path. */
export async function collectRoutes(): Promise<{ routes: CollectedRoute[]; undocumented: string[] }> {
  const app = Fastify();
  const found = new Map<string, CollectedRoute['schema']>();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) found.set(`${method} ${shape(route.url)}`, (route.schema ?? {}) as never);
  });
  await app.register(facilityRoutes, { db: inert('db') });
  await app.register(sourcesRoutes, { db: inert('db') });
  await app.register(webhookRoutes, { service: inert('service'), internalAuth: inert('internalAuth') });
  await app.register(eventRoutes, { events: inert('events'), internalAuth: inert('internalAuth') });
  await app.ready();
  await app.close();
  found.set('GET /v1/account/usage', { querystring: NoQuery, response: { 200: UsageResponseSchema } });
  // The account's own API keys (the gateway answers them with the usage service).
  found.set('GET /v1/account/keys', { querystring: NoQuery, response: { 200: KeyListResponse } });
  found.set('POST /v1/account/keys', { body: CreateKeyBody, response: { 201: CreatedKeyResponse } });
  found.set('PATCH /v1/account/keys/:', { params: KeyParams, body: RenameKeyBody, response: { 200: KeyResponse } });
  found.set('DELETE /v1/account/keys/:', { params: KeyParams });
  found.set('GET /v1/account/statements', { querystring: NoQuery, response: { 200: StatementsResponse } });
  found.set('POST /v1/account/keys/:/roll', { params: KeyParams, body: RollKeyBody, response: { 201: RolledKeyResponse } });
  // The account's history: its audit log of key changes and its usage per day (the usage service answers).
  found.set('GET /v1/account/audit-log', { querystring: AuditLogQuery, response: { 200: AuditLogResponse } });
  found.set('GET /v1/account/usage/daily', { querystring: DailyUsageQuery, response: { 200: DailyUsageResponse } });
  // Exports: the gateway walks the facility service's pages; rows are the list representations.
  const rowSchema = { facilities: FacilitySchema, violations: ViolationSchema, cases: CaseSchema };
  for (const kind of ['facilities', 'violations', 'cases'] as const) {
    found.set(`GET /v1/exports/${kind}`, { querystring: ExportPublicQuery[kind], response: { 200: rowSchema[kind] } });
  }

  const routes: CollectedRoute[] = [];
  const undocumented: string[] = [];
  for (const route of PUBLIC_ROUTES) {
    for (const method of route.methods) {
      const schema = found.get(`${method} ${shape(route.path)}`);
      if (schema) routes.push({ method, path: route.path, schema });
      else undocumented.push(`${method} ${route.path}`);
    }
  }
  return { routes, undocumented };
}
