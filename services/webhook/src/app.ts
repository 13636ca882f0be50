import {
  AppError,
  baseFastifyOptions,
  type Clock,
  Counter,
  type HttpServerSettings,
  healthRoutes,
  type IdSource,
  type InternalAuth,
  installHttpConventions,
  type Logger,
  type Pool,
  type ServiceMetrics,
} from '@fcd/service-kit';
import type { Resolver, SecretBox } from '@fcd/webhooks';
import { DeliveryLog, EventLog, parseAllowedPorts, SubscriptionStore, takeRecoverCall } from '@fcd/webhooks';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { FacilityDirectory } from './clients/facility';
import type { WebhookConfig } from './config';
import { EventsService } from './domain/events';
import { RecoveryGate } from './domain/recovery';
import { eventRoutes } from './routes/events';
import { webhookRoutes } from './routes/webhooks';
import { WebhookService } from './subscriptions/webhooks';

export interface AppDeps {
  config: Pick<WebhookConfig, 'WEBHOOK_ALLOW_PRIVATE_URLS' | 'WEBHOOK_MAX_SUBSCRIPTIONS'> &
    Partial<Pick<WebhookConfig, 'EVENT_RETENTION_DAYS' | 'WEBHOOK_ALLOWED_PORTS'>>;
  logger: Logger;
  pool: Pool;
  internalAuth: InternalAuth;
  secretBox: SecretBox;
  facilities: FacilityDirectory;
  metrics?: ServiceMetrics;
  /** Injected in tests; node:dns otherwise. */
  resolver?: Resolver;
  clock?: Clock;
  ids?: IdSource;
  isShuttingDown?: () => boolean;
  /** Timeouts and connection cap of the HTTP server. */
  http?: HttpServerSettings;
}

/** Recoveries running at once per replica: at most this many of the pool's connections (docs/webhooks.md "Recovery"). */
const RECOVERIES_AT_ONCE = 1;

function domainMetrics(metrics: ServiceMetrics | undefined) {
  if (!metrics) return undefined;
  const registers = [metrics.registry];
  return {
    urlRefused: new Counter({
      name: 'fcd_webhook_url_refusals_total',
      help: 'Webhook URLs refused at create/update, by reason.',
      labelNames: ['reason'] as const,
      registers,
    }),
    changes: new Counter({
      name: 'fcd_webhook_subscription_changes_total',
      help: 'Subscription writes by operation.',
      labelNames: ['operation'] as const,
      registers,
    }),
  };
}

/** Counts a successful subscription write (create, update, delete, rotate-secret) by operation. */
function countChange(counters: NonNullable<ReturnType<typeof domainMetrics>>, request: FastifyRequest, status: number): void {
  if (status >= 300 || !request.url.startsWith('/v1/webhooks')) return;
  const route = request.routeOptions.url;
  if (route === '/v1/webhooks/:id/rotate-secret') counters.changes.inc({ operation: 'rotate_secret' });
  if (route !== '/v1/webhooks' && route !== '/v1/webhooks/:id') return;
  const operation = { POST: 'create', PATCH: 'update', DELETE: 'delete' }[request.method];
  if (operation) counters.changes.inc({ operation });
}

/** The webhook service's HTTP app: conventions, health, /v1/webhooks and /v1/events. */
export async function buildWebhookApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify(baseFastifyOptions(deps.logger, deps.http));
  installHttpConventions(app, { metrics: deps.metrics });
  const counters = domainMetrics(deps.metrics);

  const eventLog = new EventLog(deps.pool);
  const store = new SubscriptionStore(deps.pool, deps.secretBox);
  const service = new WebhookService({
    store,
    deliveries: new DeliveryLog(deps.pool),
    events: eventLog,
    retentionDays: deps.config.EVENT_RETENTION_DAYS,
    recoverRate: (accountId, now) => takeRecoverCall(deps.pool, accountId, now),
    recoveryGate: new RecoveryGate(RECOVERIES_AT_ONCE),
    facilities: deps.facilities,
    allowPrivateUrls: deps.config.WEBHOOK_ALLOW_PRIVATE_URLS,
    allowedPorts: parseAllowedPorts(deps.config.WEBHOOK_ALLOWED_PORTS ?? '443'),
    maxSubscriptions: deps.config.WEBHOOK_MAX_SUBSCRIPTIONS,
    resolver: deps.resolver,
    clock: deps.clock,
    ids: deps.ids,
    onUrlRefused: (reason) => counters?.urlRefused.inc({ reason }),
  });

  if (counters) {
    app.addHook('onResponse', (request, reply, done) => {
      countChange(counters, request, reply.statusCode);
      done();
    });
  }

  app.setNotFoundHandler(async () => {
    throw new AppError('NOT_FOUND', 'No such route.');
  });

  await app.register(healthRoutes, {
    checks: {
      postgres: () => deps.pool.query('SELECT 1'),
      facility: () => deps.facilities.ping(),
    },
    isShuttingDown: deps.isShuttingDown ?? (() => false),
  });
  await app.register(webhookRoutes, { service, internalAuth: deps.internalAuth });
  await app.register(eventRoutes, { events: new EventsService(eventLog, store), internalAuth: deps.internalAuth });
  return app;
}
