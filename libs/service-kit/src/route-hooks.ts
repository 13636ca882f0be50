import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler, preValidationHookHandler } from 'fastify';
import type { ServiceMetrics } from './metrics';

// The per-route hooks of installHttpConventions (http.ts): the integer-query check and the RED
// metrics.

/** The only text an integer query parameter may have: decimal digits, an optional minus sign. */
const DECIMAL_INTEGER = /^-?[0-9]{1,15}$/;

/** The query parameters of a querystring schema whose type is integer or number. */
function numericQueryParameters(querystring: unknown): string[] {
  const properties = (querystring as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties;
  if (!properties) return [];
  return Object.keys(properties).filter((name) => properties[name]?.type === 'integer' || properties[name]?.type === 'number');
}

/** Refuses `names` (integer or number query parameters) whose text is not a plain decimal. */
function refuseNonDecimalNumbers(query: Record<string, unknown> | undefined, names: readonly string[]): void {
  if (!query) return;
  for (const name of names) {
    const value = query[name];
    const texts = Array.isArray(value) ? value : [value];
    if (texts.some((t) => typeof t === 'string' && !DECIMAL_INTEGER.test(t))) {
      // ajv would coerce "0x10", "1e1", " 5" or "Infinity" to numbers; a value of no JSON type
      // fails the schema's type check instead, so the field joins the other problems.
      query[name] = { text: value };
    }
  }
}

/** A route option's hooks as a new array (never the one given: Fastify copies a GET's options for its HEAD). */
const hookList = <H>(hooks: H | H[] | undefined): H[] => (hooks === undefined ? [] : ([hooks].flat() as H[]));

/**
 * Hooks that need the route's pattern or schema go on each route as it is added (`onRoute`), with
 * what they need decided there: `request.routeOptions` builds a new object at every read, and a
 * route with no integer query parameter gets no hook at all.
 */
export function installRouteHooks(app: FastifyInstance, metrics: ServiceMetrics | undefined): void {
  app.addHook('onRoute', (route) => {
    const numeric = numericQueryParameters(route.schema?.querystring);
    if (numeric.length > 0) {
      // Integer query parameters are decimal text only ("Infinity", "1e400", "0x10" are refused);
      // before the route's own preValidation hooks, as an app-level hook would run.
      const decimalOnly: preValidationHookHandler = (request, _reply, done) => {
        refuseNonDecimalNumbers(request.query as Record<string, unknown> | undefined, numeric);
        done();
      };
      route.preValidation = [decimalOnly, ...hookList(route.preValidation)];
    }
    if (metrics) route.onResponse = [...hookList(route.onResponse), redMetricsOf(route.url, metrics)];
  });
  if (metrics) {
    // The requests no route matched: the 404 handler's, counted here, and the URLs the router
    // refused (frameworkErrors, which runs no hooks), counted by countRefusedUrl.
    const unmatched = redSeriesOf('unmatched', metrics);
    unmatchedSeries.set(app, unmatched);
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) unmatched(request.method, reply.statusCode, reply.elapsedTime);
      done();
    });
  }
}

/** The "unmatched" series of each app installRouteHooks was given metrics for. */
const unmatchedSeries = new WeakMap<FastifyInstance, RecordResponse>();

/**
 * Counts a request whose URL the router refused (`frameworkErrors`: a percent-encoding that does not
 * decode, a path parameter over the limit) under the route "unmatched", as the 404 handler's are, once
 * its answer is written. Fastify runs no hook for these, so request rates would leave them out. Such a
 * request belongs to the root instance: installHttpConventions must be given the root app (every
 * service's is), else nothing is recorded.
 */
export function countRefusedUrl(request: FastifyRequest, reply: FastifyReply): void {
  const record = unmatchedSeries.get(request.server);
  if (record === undefined) return;
  const start = performance.now();
  reply.raw.once('finish', () => record(request.method, reply.statusCode, performance.now() - start));
}

/** The label-bound series of one route, method and status. */
interface RedSeries {
  duration: { observe(seconds: number): void };
  total: { inc(): void };
}

/** Records one response of a route: its method, status and duration in milliseconds. */
type RecordResponse = (method: string, status: number, elapsedMs: number) => void;

/**
 * The recorder of one route's RED metrics, by method and status. It keeps the label-bound children
 * (a bounded set: a route's methods × the statuses it answers), so a response builds no label object
 * or key (prom-client 15 still hashes and checks the bound labels on every observation).
 */
function redSeriesOf(route: string, { requestDuration, requestsTotal }: ServiceMetrics): RecordResponse {
  const byMethod = new Map<string, Map<number, RedSeries>>();
  return (method, status, elapsedMs) => {
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let series = byStatus.get(status);
    if (series === undefined) {
      const labels = { route, method, status: String(status) };
      series = { duration: requestDuration.labels(labels), total: requestsTotal.labels(labels) };
      byStatus.set(status, series);
    }
    series.duration.observe(elapsedMs / 1000);
    series.total.inc();
  };
}

/** The onResponse hook of one route's RED metrics. */
function redMetricsOf(route: string, metrics: ServiceMetrics): onResponseHookHandler {
  const record = redSeriesOf(route, metrics);
  return (request, reply, done) => {
    record(request.method, reply.statusCode, reply.elapsedTime);
    done();
  };
}
