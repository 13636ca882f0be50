import type { Server } from 'node:http';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { createHttpServer, DEFAULT_HTTP_SERVER_SETTINGS, type HttpServerSettings, METRICS_MAX_CONNECTIONS } from './http-server';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface ServiceMetrics {
  registry: Registry;
  /** RED: request duration by route/RPC, method and status (count = rate, status = errors). */
  requestDuration: Histogram<'route' | 'method' | 'status'>;
  requestsTotal: Counter<'route' | 'method' | 'status'>;
  /** Connections closed at the HTTP server's connection cap to admit new ones (idle or slow clients). */
  connectionsShed: Counter;
}

/**
 * prom-client's default gauges whose names end in `_total`, which the Prometheus naming rules keep
 * for counters (`promtool check metrics` refuses them). Each is the sum of a labelled gauge that
 * stays: nodejs_active_handles, nodejs_active_requests, nodejs_active_resources (sum them by type).
 */
export const DROPPED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** One registry per service: default process metrics plus RED metrics. */
export function createMetrics(service: string, registry = new Registry()): ServiceMetrics {
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);
  const requestDuration = new Histogram({
    name: 'fcd_request_duration_seconds',
    help: 'Duration of handled requests (HTTP routes and gRPC methods).',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const requestsTotal = new Counter({
    name: 'fcd_requests_total',
    help: 'Handled requests (HTTP routes and gRPC methods) by status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const connectionsShed = new Counter({
    name: 'fcd_http_connections_shed_total',
    help: 'Idle or slow HTTP connections closed at the connection cap (HTTP_MAX_CONNECTIONS) to admit new ones.',
    registers: [registry],
  });
  return { registry, requestDuration, requestsTotal, connectionsShed };
}

/** Serves GET /metrics on its own port (the admin port), apart from the API, with the API's timeouts. */
export async function startMetricsServer(
  registry: Registry,
  port: number,
  host = '0.0.0.0',
  settings: HttpServerSettings = DEFAULT_HTTP_SERVER_SETTINGS,
): Promise<Server> {
  const server = createHttpServer(
    settings,
    (req, res) => {
      if (req.method === 'GET' && (req.url === '/metrics' || req.url?.startsWith('/metrics?'))) {
        registry
          .metrics()
          .then((body) => {
            res.writeHead(200, { 'content-type': registry.contentType });
            res.end(body);
          })
          .catch(() => {
            res.writeHead(500).end();
          });
        return;
      }
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    },
    { maxConnections: METRICS_MAX_CONNECTIONS },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
