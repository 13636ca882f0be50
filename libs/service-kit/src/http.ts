import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { trace } from '@opentelemetry/api';
import {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyHttpOptions,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';
import { AppError, type ErrorCode, errorBody, type FieldProblem } from './errors';
import {
  answerClientError,
  createHttpServer,
  DEFAULT_HTTP_SERVER_SETTINGS,
  type HttpServerSettings,
  onConnectionShed,
  setRawRequestId,
} from './http-server';
import type { ServiceMetrics } from './metrics';
import { classifyDatabaseError } from './pg';
import { countRefusedUrl, installRouteHooks } from './route-hooks';
import { responseSerializers } from './serializer';

export const BODY_LIMIT_BYTES = 64 * 1024;
export const MAX_PARAM_LENGTH = 2048;
/** Deepest nesting of arrays and objects a JSON body may have (checked before it is parsed). */
export const MAX_JSON_DEPTH = 32;
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echo a well-formed incoming X-Request-Id, else generate one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  return typeof header === 'string' && REQUEST_ID_PATTERN.test(header) ? header : `req_${randomUUID()}`;
}

/**
 * A request's logger (`request.log`, bound to its request id) that makes its pino child only when
 * something is logged through it. Fastify makes one per request, and a pino child serialises its
 * bindings through the redaction paths (REDACT_PATHS) as it is made: a few µs of CPU and several
 * objects for the young generation per request, while the hot path logs nothing (request lines are
 * off; errors and 5xx log). The lines written are the same: the child is the one Fastify would make.
 */
class LazyChildLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger | LazyChildLogger,
    private readonly bound: Bindings,
    private readonly options: ChildLoggerOptions | undefined,
  ) {}

  /** The pino child, made on first use (a lazy parent's first). */
  real(): FastifyBaseLogger {
    if (this.made === undefined) {
      const parent = this.parent instanceof LazyChildLogger ? this.parent.real() : this.parent;
      this.made = parent.child(this.bound, this.options);
    }
    return this.made;
  }

  get level(): string {
    return this.made?.level ?? this.options?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  /**
   * A child that is lazy too, so a hook that binds a field to every request (the facility's
   * account_id) makes no pino child until a line is logged. It keeps its own bindings and makes
   * its pino child from this one's when a line is logged (one pino child per level then): merging
   * the two into new objects cost one to two µs on every request, for lines rarely written.
   */
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    if (this.made !== undefined) return this.made.child(bindings, options);
    return new LazyChildLogger(this, bindings, options) as unknown as FastifyBaseLogger;
  }
}

// The level methods, on the prototype (nothing made per request): each makes the child and logs through it.
for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const) {
  Object.defineProperty(LazyChildLogger.prototype, level, {
    value(this: LazyChildLogger, ...args: unknown[]): void {
      const logger = this.real();
      (logger[level] as (...a: unknown[]) => void).apply(logger, args);
    },
  });
}

/** Fastify's `childLoggerFactory`: each request's logger, made lazily (`LazyChildLogger`). */
export function lazyChildLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(logger, bindings, options) as unknown as FastifyBaseLogger;
}

/** Fastify options shared by every HTTP service; the server has the timeouts and connection cap of `http`. */
export function baseFastifyOptions(
  logger: Logger,
  http: HttpServerSettings = DEFAULT_HTTP_SERVER_SETTINGS,
): FastifyHttpOptions<Server, FastifyBaseLogger> {
  return {
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: false,
    childLoggerFactory: lazyChildLogger,
    genReqId: (req) => {
      const id = requestIdFrom(req.headers['x-request-id']);
      setRawRequestId(req, id);
      return id;
    },
    serverFactory: (handler) => createHttpServer(http, handler, { clientErrors: false }),
    // Errors Node raises before routing (malformed or oversized heads, timeouts) get the envelope too.
    clientErrorHandler: answerClientError,
    // Request lines are not logged by default (one line per request costs the hot path);
    // errors and 5xx are logged by the error handler with the request id.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    // Responses are written by fast-json-stringify from a copy of their schemas (serializer.ts).
    schemaController: { compilersFactory: { buildSerializer: responseSerializers } },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // A path parameter up to 2,048 characters reaches its route (so the gateway authenticates and
    // counts it, and the route answers 404/400 as for any unknown id); beyond that, and for a URL
    // whose percent-encoding does not decode, the router gives up before any hook runs and
    // `frameworkErrors` answers with the envelope (docs/api.md, "Malformed URLs").
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: (error, request, reply) => {
      countRefusedUrl(request, reply);
      reply.header('x-request-id', request.id);
      if (error.code === 'FST_ERR_BAD_URL') {
        sendError(reply, new AppError('BAD_REQUEST', 'The request URL is not valid: a percent-encoded sequence does not decode.'));
      } else if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
        sendError(reply, new AppError('NOT_FOUND', 'No such resource.'));
      } else {
        // FST_ERR_ASYNC_CONSTRAINT (no route here uses async constraints): a bug, not the client's fault.
        request.log.error({ err: error }, 'unhandled router error');
        sendError(reply, toAppError(error, request));
      }
    },
    ajv: {
      customOptions: {
        allErrors: true,
        coerceTypes: 'array',
        removeAdditional: false,
        useDefaults: true,
      },
    },
  };
}

/** Turns ajv errors from Fastify's validation into field problems (docs/api.md "Errors"). */
export function fieldProblems(validation: NonNullable<FastifyError['validation']>, context: string | undefined): FieldProblem[] {
  const problems: FieldProblem[] = [];
  for (const v of validation) {
    const params = v.params as Record<string, unknown>;
    let path = v.instancePath
      .split('/')
      .filter(Boolean)
      .map((seg) => (/^\d+$/.test(seg) ? `[${seg}]` : `.${seg}`))
      .join('')
      .replace(/^\./, '');
    let message = v.message ?? 'is invalid';
    if (v.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') {
      path = path ? `${path}.${params.additionalProperty}` : params.additionalProperty;
      message = context === 'querystring' ? 'is not a known query parameter' : 'is not a known field';
    } else if (v.keyword === 'type' && params.type === 'integer') {
      message = 'must be a decimal integer';
    } else if (v.keyword === 'required' && typeof params.missingProperty === 'string') {
      path = path ? `${path}.${params.missingProperty}` : params.missingProperty;
      message = 'is required';
    }
    if (!path) path = context === 'querystring' ? 'query' : 'body';
    if (!problems.some((p) => p.field === path && p.message === message)) problems.push({ field: path, message });
  }
  return problems;
}

const FASTIFY_CODE_MAP: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BAD_REQUEST',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'BAD_REQUEST',
  FST_ERR_CTP_INVALID_JSON_BODY: 'BAD_REQUEST',
};

const FASTIFY_MESSAGES: Partial<Record<ErrorCode, string>> = {
  PAYLOAD_TOO_LARGE: `The request body is larger than ${BODY_LIMIT_BYTES} bytes.`,
  UNSUPPORTED_MEDIA_TYPE: 'Request bodies must be sent with Content-Type: application/json.',
  BAD_REQUEST: 'The request body is not valid JSON.',
};

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  if (err.headers) reply.headers(err.headers);
  if (err.retryAfterSeconds !== undefined) reply.header('retry-after', String(err.retryAfterSeconds));
  return reply
    .code(err.status)
    .type('application/json; charset=utf-8')
    .send(errorBody(err.code, err.message, err.details));
}

/** Maps any thrown error to the error envelope (docs/api.md "Errors"). The one error mapper for HTTP. */
export function toAppError(thrown: FastifyError | Error, request: FastifyRequest): AppError {
  // Database outages and unstorable input are classified once here, for every service.
  const error = classifyDatabaseError(thrown) as FastifyError | Error;
  if (error instanceof AppError) return error;
  const fe = error as FastifyError;
  if (fe.validation) {
    return new AppError('VALIDATION_ERROR', 'The request is invalid.', {
      details: { fields: fieldProblems(fe.validation, fe.validationContext) },
    });
  }
  const mapped = fe.code ? FASTIFY_CODE_MAP[fe.code] : undefined;
  if (mapped) return new AppError(mapped, FASTIFY_MESSAGES[mapped] ?? 'Bad request.');
  if (fe instanceof SyntaxError || fe.statusCode === 400) return new AppError('BAD_REQUEST', 'The request body is not valid JSON.');
  if (fe.statusCode === 413) return new AppError('PAYLOAD_TOO_LARGE', FASTIFY_MESSAGES.PAYLOAD_TOO_LARGE as string);
  if (fe.statusCode === 415) return new AppError('UNSUPPORTED_MEDIA_TYPE', FASTIFY_MESSAGES.UNSUPPORTED_MEDIA_TYPE as string);
  if (fe.statusCode === 503) return new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down. Retry.', { retryAfterSeconds: 1 });
  return new AppError('INTERNAL_ERROR', `An internal error occurred. Quote request id ${request.id} when reporting it.`);
}

/** True when `text` nests arrays/objects deeper than `max` (strings skipped); linear, no recursion. */
export function exceedsJsonDepth(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) {
      inString = true;
    } else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) {
      depth--;
    }
  }
  return false;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Only JSON bodies, and only objects (BAD_REQUEST otherwise: docs/api.md "Errors"). */
function installJsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (exceedsJsonDepth(body as string)) {
      return done(new AppError('BAD_REQUEST', `The request body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels.`), undefined);
    }
    parseJson(request, body as string, (err, value) => {
      if (err) {
        // Fastify's parser (secure-json-parse) also refuses valid JSON with __proto__ or
        // constructor.prototype keys (prototype poisoning); tell the client which it was.
        const message = isJson(body as string)
          ? 'The request body must not contain "__proto__" or "constructor.prototype" keys.'
          : 'The request body is not valid JSON.';
        return done(new AppError('BAD_REQUEST', message), undefined);
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        return done(new AppError('BAD_REQUEST', 'The request body must be a JSON object.'), undefined);
      }
      done(null, value);
    });
  });
}

/** The connections shed at the connection cap: counted, and one warning per burst (at most every 10 s). */
function countShedConnections(app: FastifyInstance, { connectionsShed }: ServiceMetrics): void {
  let shedSinceLog = 0;
  let lastLog = 0;
  onConnectionShed(app.server, () => {
    connectionsShed.inc();
    shedSinceLog++;
    if (Date.now() - lastLog < 10_000) return;
    app.log.warn({ shed: shedSinceLog }, 'connection cap reached: idle or slow connections closed to admit new ones');
    shedSinceLog = 0;
    lastLog = Date.now();
  });
}

export interface HttpConventionOptions {
  metrics?: ServiceMetrics;
}

/**
 * Installs the conventions every HTTP service shares: X-Request-Id on every
 * response, one error handler producing the envelope, JSON-only bodies that
 * must be objects, and RED metrics.
 */
export function installHttpConventions(app: FastifyInstance, options: HttpConventionOptions = {}): void {
  // The hooks of every request take `done` rather than being async when they never wait: an async
  // hook costs a promise and a microtask hop, and Fastify a `then` on it (a throw is still an error
  // of the request: Fastify catches it as it would a rejection).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // The HTTP server span (when tracing) gets the route and the request id.
    const span = trace.getActiveSpan();
    if (span?.isRecording()) {
      const route = request.routeOptions.url;
      if (route) {
        span.setAttribute('http.route', route);
        span.updateName(`${request.method} ${route}`);
      }
      span.setAttribute('fcd.request_id', request.id);
    }
    done();
  });

  installRouteHooks(app, options.metrics);

  installJsonBodies(app);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const appError = toAppError(error, request);
    if (appError.code === 'INTERNAL_ERROR') {
      request.log.error({ err: error }, 'unhandled error');
    } else if (appError.code === 'SERVICE_UNAVAILABLE') {
      request.log.warn({ code: appError.code, dependency: appError.details?.dependency }, appError.message);
    }
    return sendError(reply, appError);
  });

  if (options.metrics) countShedConnections(app, options.metrics);
}
