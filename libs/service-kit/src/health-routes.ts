import type { FastifyInstance, HTTPMethods } from 'fastify';
import { AppError } from './errors';
import { type Check, checkReadiness } from './health';

export interface HealthRoutesOptions {
  /** The dependencies readiness requires (e.g. postgres, nats), each a round trip. */
  checks: Record<string, Check>;
  /** True once shutdown began: the instance reports not ready so traffic drains away. */
  isShuttingDown: () => boolean;
  /** Checks reported but not required (a documented degradation): 200 "degraded" when one is down. */
  optional?: readonly string[];
  /** A public endpoint reports each dependency's state only; the reasons go to the log (default false). */
  hideErrors?: boolean;
  /** Timeout of each check (default 1 s). */
  timeoutMs?: number;
}

/**
 * GET /healthz (the process serves: `{ data: { status: "ok" } }`) and GET /readyz, the same body
 * in every service: 200 `{ data: { status: "ready" | "degraded", checks } }`, or 503
 * SERVICE_UNAVAILABLE with Retry-After: 1 and `error.details.checks` naming each dependency's
 * state (and `process: down` once shutdown began). Unauthenticated.
 */
export async function healthRoutes(app: FastifyInstance, o: HealthRoutesOptions): Promise<void> {
  registerHealthRoutes(app, o);
}

/**
 * The routes of `healthRoutes`, added to `app` itself at once rather than as a plugin loaded at
 * `ready()`: for an app built synchronously, keeping its routes in declaration order.
 */
export function registerHealthRoutes(app: FastifyInstance, o: HealthRoutesOptions): void {
  app.get('/healthz', async () => ({ data: { status: 'ok' } }));
  app.get('/readyz', async (request) => {
    const report = await checkReadiness(o.checks, o.timeoutMs ?? 1000, o.optional ?? []);
    const checks: Record<string, { status: 'up' | 'down'; error?: string }> = o.hideErrors
      ? Object.fromEntries(Object.entries(report.checks).map(([name, c]) => [name, { status: c.status }]))
      : report.checks;
    if (o.isShuttingDown()) {
      throw new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down.', {
        retryAfterSeconds: 1,
        details: { checks: { ...checks, process: { status: 'down', ...(o.hideErrors ? {} : { error: 'shutting down' }) } } },
      });
    }
    if (!report.ready) {
      if (o.hideErrors) request.log.warn({ checks: report.checks }, 'not ready');
      const down = Object.entries(report.checks)
        .filter(([name, c]) => c.status === 'down' && !(o.optional ?? []).includes(name))
        .map(([name]) => name);
      throw new AppError('SERVICE_UNAVAILABLE', `Not ready: ${down.join(', ')} unavailable.`, {
        retryAfterSeconds: 1,
        details: { checks },
      });
    }
    const degraded = Object.values(report.checks).some((c) => c.status === 'down');
    return { data: { status: degraded ? 'degraded' : 'ready', checks } };
  });
}

const ALL_METHODS: readonly HTTPMethods[] = ['DELETE', 'GET', 'PATCH', 'POST', 'PUT', 'OPTIONS'];

/**
 * 405 METHOD_NOT_ALLOWED with Allow for `url` and every method it does not serve (HEAD is allowed
 * with GET). Register it after the real routes of `url`. `before` runs first (e.g. an
 * authentication check that must answer 401 before a 405 reveals the path).
 */
export function methodNotAllowed(
  app: FastifyInstance,
  url: string,
  allowed: readonly string[],
  options: { before?: Parameters<FastifyInstance['route']>[0]['onRequest']; methods?: readonly HTTPMethods[] } = {},
): void {
  const allow = [...allowed, ...(allowed.includes('GET') && !allowed.includes('HEAD') ? ['HEAD'] : [])];
  const others = (options.methods ?? ALL_METHODS).filter((m) => !allow.includes(m));
  if (others.length === 0) return;
  app.route({
    method: [...others],
    url,
    ...(options.before ? { onRequest: options.before } : {}),
    handler: async () => {
      throw new AppError('METHOD_NOT_ALLOWED', `This path does not support that method. Allowed: ${allow.join(', ')}.`, {
        headers: { allow: allow.join(', ') },
      });
    },
  });
}
