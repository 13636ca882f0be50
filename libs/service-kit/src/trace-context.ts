import { type Context, context, propagation, type SpanContext, trace } from '@opentelemetry/api';

// Services make their own spans through these (the API is a no-op until dist/telemetry.js starts the SDK).
export { type Context, context, type Link, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

// Trace context in message headers and stored rows (NATS, outbox, deliveries)

/** A string-keyed carrier: `traceparent`/`tracestate` (W3C). */
export type TraceCarrier = Record<string, string>;

/** The active (or given) context as W3C headers; empty when there is no sampled span. */
export function injectTraceContext(ctx: Context = context.active()): TraceCarrier {
  const carrier: TraceCarrier = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/** The context carried by `carrier` (no carrier → the root context). */
export function extractTraceContext(carrier: TraceCarrier | null | undefined, ctx: Context = context.active()): Context {
  return carrier ? propagation.extract(ctx, carrier) : ctx;
}

/** Serialises the active trace context for a database column (null when there is none). */
export function traceContextColumn(ctx: Context = context.active()): string | null {
  const carrier = injectTraceContext(ctx);
  return carrier.traceparent ? JSON.stringify(carrier) : null;
}

/** The context stored by traceContextColumn (unknown shapes are ignored). */
export function contextFromColumn(value: string | null | undefined, ctx: Context = context.active()): Context {
  if (!value) return ctx;
  try {
    const parsed = JSON.parse(value) as unknown;
    if (parsed && typeof parsed === 'object' && typeof (parsed as TraceCarrier).traceparent === 'string') {
      return propagation.extract(ctx, parsed as TraceCarrier);
    }
  } catch {
    // not ours
  }
  return ctx;
}

/** The span context of the active span, when there is a valid one. */
export function activeSpanContext(): SpanContext | undefined {
  const sc = trace.getActiveSpan()?.spanContext();
  return sc && trace.isSpanContextValid(sc) ? sc : undefined;
}

const SHUTDOWN_KEY = Symbol.for('fcd.telemetry.shutdown');
type TelemetryGlobal = { [SHUTDOWN_KEY]?: () => Promise<void> };

/**
 * The telemetry bundle and the app bundle each inline service-kit, so the
 * SDK's flush is handed over through a process-wide symbol.
 */
export function setTelemetryShutdownHook(run: () => Promise<void>): void {
  (globalThis as TelemetryGlobal)[SHUTDOWN_KEY] = run;
}

/** The SDK's flush-and-shutdown, when telemetry was started in this process. */
export function telemetryShutdownHook(): (() => Promise<void>) | undefined {
  return (globalThis as TelemetryGlobal)[SHUTDOWN_KEY];
}
