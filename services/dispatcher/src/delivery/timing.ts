import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { buildConnector, type Dispatcher } from 'undici';

/**
 * Phase timings of one delivery attempt (what the delivery log shows): DNS,
 * TCP connect, TLS handshake and first byte, in ms.
 *
 * - The connection phases are measured on the socket itself: a connector that
 *   wraps undici's own (`buildConnector`) notes when the socket was asked for
 *   and when it emitted `lookup` (DNS answered), `connect` (TCP up) and
 *   `secureConnect` (TLS done).
 * - The request is tied to its socket by undici's `undici:client:sendHeaders`
 *   diagnostics channel ({ request, socket }). undici calls the request's
 *   handler (`onRequestStart`) and publishes that message in the same
 *   synchronous step of writing the request, so the attempt whose handler ran
 *   last is the one on that socket; only sockets made by our connector count.
 * - First byte is the time from the request being written to its response
 *   head arriving (the handler's `onResponseStart`).
 *
 * A request sent on a kept-alive connection (or on one begun before it was dispatched, for a request
 * that was then stopped unwritten) made no DNS, connect or TLS step:
 * those are null and `connectionReused` is true. A phase that did not finish
 * (a DNS failure, a refused connection) is null as well.
 */

export interface AttemptTimings {
  dnsMs: number | null;
  connectMs: number | null;
  tlsMs: number | null;
  firstByteMs: number | null;
  connectionReused: boolean | null;
}

export const NO_TIMINGS: AttemptTimings = { dnsMs: null, connectMs: null, tlsMs: null, firstByteMs: null, connectionReused: null };

interface ConnectionTiming {
  startedAt: number;
  lookupAt: number | null;
  connectAt: number | null;
  secureAt: number | null;
  /** Requests written on this connection so far. */
  requests: number;
}

/** What one attempt learns while undici sends it. */
export interface TimingProbe {
  /** When the request was handed to undici. */
  dispatchedAt?: number;
  connection?: ConnectionTiming;
  /** This request was the n-th on its connection. */
  requestNumber?: number;
  requestAt?: number;
  firstByteAt?: number;
}

const connections = new WeakMap<object, ConnectionTiming>();
/** The probe whose request undici is writing right now (set by its handler, taken by the channel message that follows). */
let writing: TimingProbe | undefined;
let subscribed = false;

function ensureSubscribed(): void {
  if (subscribed) return;
  subscribed = true;
  subscribe('undici:client:sendHeaders', (message) => {
    const probe = writing;
    writing = undefined;
    const socket = (message as { socket?: object }).socket;
    const connection = socket ? connections.get(socket) : undefined;
    if (!probe || !connection) return;
    connection.requests += 1;
    probe.connection = connection;
    probe.requestNumber = connection.requests;
  });
}

/** undici's connector (same options), noting each connection's phase times. */
export function timedConnector(options: buildConnector.BuildOptions): buildConnector.connector {
  ensureSubscribed();
  const connect = buildConnector(options);
  return (opts, callback) => {
    const timing: ConnectionTiming = { startedAt: performance.now(), lookupAt: null, connectAt: null, secureAt: null, requests: 0 };
    // undici's connector returns the socket it is connecting (its types say void).
    const socket = connect(opts, callback) as unknown as Socket | undefined;
    if (!socket) return;
    connections.set(socket, timing);
    socket.once('lookup', () => {
      timing.lookupAt = performance.now();
    });
    socket.once('connect', () => {
      timing.connectAt = performance.now();
    });
    socket.once('secureConnect', () => {
      timing.secureAt = performance.now();
    });
    return socket;
  };
}

/**
 * A dispatcher interceptor that fills `probe` for the one request sent through it. `beforeWrite`,
 * when given, runs first in `onRequestStart` (the connection is up, nothing is written yet); if it
 * throws, the request fails unwritten and is not noted as written on its socket.
 */
export function timingInterceptor(probe: TimingProbe, beforeWrite?: () => void): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (opts, handler) => {
    probe.dispatchedAt = performance.now();
    return dispatch(opts, {
      onRequestStart(controller, context) {
        beforeWrite?.();
        probe.requestAt = performance.now();
        writing = probe;
        handler.onRequestStart?.(controller, context);
      },
      onRequestUpgrade(controller, statusCode, headers, socket) {
        handler.onRequestUpgrade?.(controller, statusCode, headers, socket);
      },
      onResponseStart(controller, statusCode, headers, statusMessage) {
        probe.firstByteAt ??= performance.now();
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
      },
      onResponseData(controller, chunk) {
        handler.onResponseData?.(controller, chunk);
      },
      onResponseEnd(controller, trailers) {
        handler.onResponseEnd?.(controller, trailers);
      },
      onResponseError(controller, error) {
        handler.onResponseError?.(controller, error);
      },
    });
  };
}

const ms = (from: number | null | undefined, to: number | null | undefined): number | null =>
  from == null || to == null ? null : Math.max(0, Math.round((to - from) * 1000) / 1000);

/** The phase durations a probe saw (ms, 3 decimals). */
export function timingsOf(probe: TimingProbe): AttemptTimings {
  const c = probe.connection;
  const firstByteMs = ms(probe.requestAt, probe.firstByteAt);
  if (!c) return { ...NO_TIMINGS, firstByteMs };
  // Reused: not its connection's first request, or a connection begun before this request was
  // dispatched (for one that was stopped unwritten, ./sender.ts's start gate).
  const begunBefore = probe.dispatchedAt !== undefined && c.startedAt < probe.dispatchedAt;
  if ((probe.requestNumber ?? 1) > 1 || begunBefore)
    return { dnsMs: null, connectMs: null, tlsMs: null, firstByteMs, connectionReused: true };
  // An IP-literal host is not looked up (no `lookup` event): DNS took no time.
  const dnsEnd = c.lookupAt ?? (c.connectAt !== null ? c.startedAt : null);
  return {
    dnsMs: ms(c.startedAt, dnsEnd),
    connectMs: ms(dnsEnd, c.connectAt),
    tlsMs: ms(c.connectAt, c.secureAt),
    firstByteMs,
    connectionReused: false,
  };
}
