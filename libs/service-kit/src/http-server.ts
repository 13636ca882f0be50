import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { Type } from '@sinclair/typebox';
import { ERROR_STATUS, type ErrorCode, errorBody } from './errors';

/**
 * Every HTTP server of every service (the API port and the metrics port) is
 * made here, so the edge rules hold everywhere: timeouts on slow or idle
 * clients, the error envelope for errors Node raises before any route runs,
 * and a connection cap that sheds the oldest idle or slow socket rather than
 * running out of file descriptors (docs/operations.md, "HTTP servers").
 */
export interface HttpServerSettings {
  /** Time to receive a whole request (head and body); then 408. */
  HTTP_REQUEST_TIMEOUT_MS: number;
  /** Time to receive a request's head; then 408. At most HTTP_REQUEST_TIMEOUT_MS. */
  HTTP_HEADERS_TIMEOUT_MS: number;
  /** An idle keep-alive connection is closed after this time. */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: number;
  /** Open connections kept at most; unset: the process's file-descriptor limit less a reserve. */
  HTTP_MAX_CONNECTIONS?: number;
  /** At shutdown, how long keep-alive connections are drained before the server closes (see `drainConnections`). */
  HTTP_DRAIN_MS?: number;
}

/** Config schema fragment: spread into each service's schema. */
export const HttpServerEnv = {
  HTTP_REQUEST_TIMEOUT_MS: Type.Integer({ default: 30_000, minimum: 100, maximum: 600_000 }),
  HTTP_HEADERS_TIMEOUT_MS: Type.Integer({ default: 10_000, minimum: 100, maximum: 600_000 }),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: Type.Integer({ default: 72_000, minimum: 100, maximum: 600_000 }),
  HTTP_MAX_CONNECTIONS: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000 })),
  HTTP_DRAIN_MS: Type.Integer({ default: 1000, minimum: 0, maximum: 20_000 }),
};

export const DEFAULT_HTTP_SERVER_SETTINGS: HttpServerSettings = {
  HTTP_REQUEST_TIMEOUT_MS: 30_000,
  HTTP_HEADERS_TIMEOUT_MS: 10_000,
  HTTP_KEEP_ALIVE_TIMEOUT_MS: 72_000,
};

/** Cross-field rules of the fragment (Node refuses a headers timeout above the request timeout). */
export function httpServerSettingsProblems(values: Record<string, unknown>): string[] {
  const headers = values.HTTP_HEADERS_TIMEOUT_MS;
  const request = values.HTTP_REQUEST_TIMEOUT_MS;
  if (typeof headers === 'number' && typeof request === 'number' && headers > request) {
    return ['HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS'];
  }
  return [];
}

/** Descriptors kept free for everything but client connections (pools, gRPC, NATS, logs, DNS). */
export const DESCRIPTOR_RESERVE = 256;
/** The metrics port only serves scrapes. */
export const METRICS_MAX_CONNECTIONS = 32;

/** The soft RLIMIT_NOFILE of this process (Linux /proc), or undefined where it cannot be read. */
export function descriptorLimit(limitsText?: string): number | undefined {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return undefined;
    }
  }
  const soft = /^Max open files\s+(\d+|unlimited)\s/m.exec(text)?.[1];
  return soft === undefined || soft === 'unlimited' ? undefined : Number(soft);
}

/** HTTP_MAX_CONNECTIONS, or the descriptor limit less the reserve (at least 64); 0 = no cap. */
export function maxConnections(settings: HttpServerSettings, limit = descriptorLimit()): number {
  if (settings.HTTP_MAX_CONNECTIONS !== undefined) return settings.HTTP_MAX_CONNECTIONS;
  return limit === undefined ? 0 : Math.max(64, limit - DESCRIPTOR_RESERVE);
}

/**
 * Request ids of requests Fastify has seen, so an error on their socket quotes the same id: a
 * property of the request (a WeakMap keyed by every request costs the garbage collector an
 * ephemeron per request).
 */
const REQUEST_ID = Symbol('fcd.requestId');
type WithRequestId = IncomingMessage & { [REQUEST_ID]?: string };

export function setRawRequestId(req: IncomingMessage, id: string): void {
  (req as WithRequestId)[REQUEST_ID] = id;
}

function rawRequestId(req: IncomingMessage): string | undefined {
  return (req as WithRequestId)[REQUEST_ID];
}

/** Each socket's last response (its request is `res.req`). */
const exchanges = new WeakMap<Socket, ServerResponse>();
const answered = new WeakSet<Socket>();
/**
 * Sockets whose close is decided (after an error, `closeAfterAnswer`): a request read now is not
 * run.
 */
const closing = new WeakSet<Socket>();

const CLIENT_ERRORS: Record<string, { code: ErrorCode; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: { code: 'REQUEST_TIMEOUT', message: 'The request was not received in time.' },
  HPE_HEADER_OVERFLOW: { code: 'HEADERS_TOO_LARGE', message: 'The request headers are too large.' },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { code: 'PAYLOAD_TOO_LARGE', message: 'The chunk extensions of the request body are too large.' },
};
const MALFORMED = { code: 'BAD_REQUEST' as const, message: 'The request is not valid HTTP/1.1.' };

/**
 * `clientError`: Node could not read a request (malformed head, conflicting
 * lengths, header overflow, timeout). Answers with the error envelope and an
 * X-Request-Id where a response can still be written, then closes.
 *
 * A timeout is answered one turn of the event loop later. Node checks its timeouts on a timer,
 * and after the process stalled (a long pause of the process or its VM) the timer runs before
 * what arrived meanwhile is read: a connection accepted just before the stall, whose request is
 * already in its buffer, would be answered 408. The turn reads it; a request that is then whole
 * is served as if in time. Anything else (a head or body still incomplete) gets its 408: Node
 * has stopped timing the connection, so it must not be left open.
 */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (socket.destroyed || answered.has(socket) || closing.has(socket)) return;
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    answerTimeoutAfterRead(err, socket);
    return;
  }
  answered.add(socket);
  if (err.code === 'ECONNRESET' || err.code === 'EPIPE') {
    socket.destroy();
    return;
  }
  answerUnreadable(err, socket);
}

const timing = new WeakSet<Socket>();

function answerTimeoutAfterRead(err: Error & { code?: string }, socket: Socket): void {
  if (timing.has(socket)) return;
  timing.add(socket);
  const before = exchanges.get(socket);
  const wasWhole = before?.req.complete === true;
  setImmediate(() => {
    timing.delete(socket);
    if (socket.destroyed || answered.has(socket)) return;
    const now = exchanges.get(socket);
    // A request read whole in this turn: a new one, or the one whose body was awaited.
    if (now?.req.complete && (now !== before || !wasWhole)) return;
    answered.add(socket);
    answerUnreadable(err, socket);
  });
}

function answerUnreadable(err: Error & { code?: string }, socket: Socket): void {
  const last = exchanges.get(socket);
  if (last?.req.complete && !last.writableFinished) {
    // A later (pipelined) request is unreadable while this one is still being answered (or is
    // queued: a queued answer is not finished): the error goes after that answer, not ahead of
    // it or in its place.
    last.once('finish', () => answerUnreadable(err, socket));
    return;
  }
  // The socket's last exchange, unless it is over (the next request's head may be arriving).
  const current = last && !last.req.complete ? last : undefined;
  if (current && current.socket === null && !current.writableFinished) {
    // Its body is late, and its answer is queued behind an earlier one still being written (a
    // finished answer has no socket either): the error goes when the socket is this answer's.
    current.once('socket', () => answerUnreadable(err, socket));
    return;
  }
  if (current?.headersSent) {
    // This request was already answered (its body still coming) or is being answered: closed
    // once that answer is written, if it is whole. From now on no request is run (`closing`):
    // its answer would come after the close.
    if (current.writableEnded && !current.writableFinished) {
      closing.add(socket);
      current.once('finish', () => closeAfterAnswer(socket));
    } else socket.destroy();
    return;
  }
  const { code, message } = CLIENT_ERRORS[err.code ?? ''] ?? MALFORMED;
  const status = ERROR_STATUS[code];
  const id = (current && rawRequestId(current.req)) ?? `req_${randomUUID()}`;
  const body = JSON.stringify(errorBody(code, message));
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${id}`,
    'connection: close',
  ].join('\r\n');
  closeAfterAnswer(socket, `${head}\r\n\r\n${body}`);
}

/**
 * Half-closes after the answer (`last`, or what was written), keeps reading what the client still
 * sends (closing with unread input would reset the connection and could lose the answer), then
 * closes for good a second later. Node still parses what it reads; a request read whole in that
 * second is not run (`unlessClosing`): its answer could not be sent (docs/operations.md,
 * "Pipelining").
 */
function closeAfterAnswer(socket: Socket, last?: string): void {
  // Shed at the cap (or reset) while its answer was written: nothing left to close.
  if (socket.destroyed) return;
  closing.add(socket);
  const timer = setTimeout(() => socket.destroy(), 1000);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  if (!socket.writable) socket.destroy();
  else if (last === undefined) socket.end();
  else socket.end(last);
}

const shedListeners = new WeakMap<Server, Array<() => void>>();

/** Calls `listener` each time the server sheds a connection at its cap. */
export function onConnectionShed(server: Server, listener: () => void): void {
  shedListeners.set(server, [...(shedListeners.get(server) ?? []), listener]);
}

/**
 * Keeps at most `max` connections: a new connection over the cap closes the
 * connection idle or slow for the longest time (between requests, or still
 * sending its head or body). Connections with a complete request being
 * answered are never closed; pipelined, that is any of its requests, not only
 * the last one read. When every connection is so busy, the new one is let in
 * over the cap.
 */
export function capConnections(server: Server, max: number, onShed?: () => void): void {
  if (max <= 0) return;
  // Insertion order = least recent activity first (a finished response moves a socket to the end).
  // Each socket's answers not finished yet, in request order: pipelined, an earlier one may still
  // be produced while a later one has ended. (An array: they finish in order, so `shift` keeps
  // it, without the allocation a Set makes as it empties after each request.)
  const open = new Map<Socket, ServerResponse[]>();
  // A closing connection runs nothing more: never busy, whatever it read. An answer that has ended
  // but waits for a client that does not read does not make it busy.
  const busy = (socket: Socket) => {
    if (closing.has(socket)) return false;
    for (const res of open.get(socket) ?? []) if (res.req.complete && !res.writableEnded) return true;
    return false;
  };
  // One function for every response (a response finishes once): no closure per request.
  function finished(this: ServerResponse): void {
    const socket = this.req.socket;
    const answers = open.get(socket);
    if (!answers) return;
    const at = answers.indexOf(this);
    if (at === 0) answers.shift();
    else if (at > 0) answers.splice(at, 1);
    open.delete(socket);
    if (!socket.destroyed) open.set(socket, answers);
  }
  server.on('connection', (socket: Socket) => {
    if (open.size >= max) {
      for (const candidate of open.keys()) {
        if (busy(candidate)) continue;
        open.delete(candidate);
        candidate.destroy();
        onShed?.();
        for (const listener of shedListeners.get(server) ?? []) listener();
        break;
      }
    }
    open.set(socket, []);
    socket.once('close', () => open.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    open.get(req.socket)?.push(res);
    res.on('finish', finished);
  });
}

export interface HttpServerOptions {
  /** Whether this function installs the clientError handler (Fastify installs its own option). */
  clientErrors?: boolean;
  /** Fixed connection cap (the metrics port); else from the settings. */
  maxConnections?: number;
  onShed?: () => void;
}

/** node:http options of the settings (Node checks its timeouts every `connectionsCheckingInterval`). */
export function nodeServerOptions(settings: HttpServerSettings) {
  const shortest = Math.min(settings.HTTP_HEADERS_TIMEOUT_MS, settings.HTTP_REQUEST_TIMEOUT_MS);
  return {
    requestTimeout: settings.HTTP_REQUEST_TIMEOUT_MS,
    headersTimeout: settings.HTTP_HEADERS_TIMEOUT_MS,
    keepAliveTimeout: settings.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(shortest / 4))),
  };
}

/**
 * The request listener, but not for a request read on a connection whose close is decided
 * (`closing`): that request is read to its end and dropped, unanswered and not run (the client
 * sees the connection close without its answer, so it knows the request was not done).
 */
function unlessClosing(handler: RequestListener): RequestListener {
  return (req, res) => {
    if (!closing.has(req.socket)) {
      handler(req, res);
      return;
    }
    req.resume();
  };
}

/** An HTTP server with the edge rules of the settings. */
export function createHttpServer(settings: HttpServerSettings, handler: RequestListener, options: HttpServerOptions = {}): Server {
  const server = createServer(nodeServerOptions(settings), unlessClosing(handler));
  // A request dropped on a closing connection (`unlessClosing`) is not its last exchange.
  server.on('request', (req: IncomingMessage, res: ServerResponse) => closing.has(req.socket) || exchanges.set(req.socket, res));
  if (options.clientErrors !== false) server.on('clientError', answerClientError);
  capConnections(server, options.maxConnections ?? maxConnections(settings), options.onShed);
  return server;
}

/**
 * Drains keep-alive connections before a server closes (shutdown, after the pod left the
 * Service's endpoints): from now on every answer carries `Connection: close` and Node closes the
 * socket once it is written, so a client still sending on a connection it opened to this replica
 * gets its answer, then connects again (through the Service, to another replica). Resolves when no
 * connection is open, or after `maxMs`; then the caller closes the server, which closes the
 * connections still idle. Closing idle keep-alive sockets at once instead races with requests
 * the clients are writing on them: those are reset unanswered.
 */
export async function drainConnections(server: Server, maxMs: number): Promise<void> {
  if (!server.listening || maxMs <= 0) return;
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    res.shouldKeepAlive = false;
  });
  const open = () => new Promise<number>((resolve) => server.getConnections((err, n) => resolve(err ? 0 : n)));
  const end = Date.now() + maxMs;
  while (Date.now() < end && (await open()) > 0) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(1, end - Date.now()))));
  }
}
