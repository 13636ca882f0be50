import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import type { Attributes } from '@opentelemetry/api';
import { type ExportResult, ExportResultCode, hrTimeToMicroseconds } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { setTelemetryShutdownHook } from './trace-context';

/**
 * OpenTelemetry for every service, loaded before the app:
 * `node --import ./dist/telemetry.js ./dist/main.js`, where the service's
 * src/telemetry.ts is `await startTelemetry('<name>')`.
 *
 * Configured only by OTEL_* variables:
 * - OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set → OTLP/HTTP export (batched).
 * - OTEL_TRACES_EXPORTER: comma list of `otlp`, `console`, `jsonl`, `none`; overrides the above.
 *   `jsonl` appends one JSON object per finished span to OTEL_EXPORTER_JSONL_FILE.
 * - Nothing set → no SDK at all: no spans, no cost on the hot path (trace context is not propagated).
 * - OTEL_SDK_DISABLED=true, OTEL_TRACES_SAMPLER*, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES as the spec says.
 */

/** A finished span as one JSON line: enough to rebuild a trace (ids, parent, kind, service, attributes). */
export interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: number;
  service: string;
  scope: string;
  startUs: number;
  durationUs: number;
  status: { code: number; message?: string };
  attributes: Attributes;
  links: Array<{ traceId: string; spanId: string }>;
}

export function toSpanRecord(span: ReadableSpan): SpanRecord {
  const ctx = span.spanContext();
  return {
    traceId: ctx.traceId,
    spanId: ctx.spanId,
    parentSpanId: span.parentSpanContext?.spanId ?? null,
    name: span.name,
    kind: span.kind,
    service: String(span.resource.attributes['service.name'] ?? ''),
    scope: span.instrumentationScope.name,
    startUs: hrTimeToMicroseconds(span.startTime),
    durationUs: hrTimeToMicroseconds(span.duration),
    status: span.status,
    attributes: span.attributes,
    links: span.links.map((l) => ({ traceId: l.context.traceId, spanId: l.context.spanId })),
  };
}

/**
 * Appends finished spans to a file, one JSON object per line (OTEL_TRACES_EXPORTER=jsonl).
 * Useful locally and in tests that assert on whole traces across processes.
 */
export class JsonLinesSpanExporter implements SpanExporter {
  private stopped = false;
  constructor(private readonly file: string) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.stopped) {
      resultCallback({ code: ExportResultCode.FAILED, error: new Error('exporter shut down') });
      return;
    }
    try {
      if (spans.length > 0) appendFileSync(this.file, spans.map((s) => `${JSON.stringify(toSpanRecord(s))}\n`).join(''));
      resultCallback({ code: ExportResultCode.SUCCESS });
    } catch (err) {
      resultCallback({ code: ExportResultCode.FAILED, error: err as Error });
    }
  }

  async forceFlush(): Promise<void> {}

  async shutdown(): Promise<void> {
    this.stopped = true;
  }
}

/** Span processors from the environment; empty = telemetry off. Throws on a value it does not know. */
export function spanProcessorsFromEnv(env: NodeJS.ProcessEnv = process.env): SpanProcessor[] {
  let names = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (names.length === 0 && (env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)) names = ['otlp'];
  if (names.includes('none')) return [];
  return names.map((name) => {
    switch (name) {
      case 'otlp':
        return new BatchSpanProcessor({ exporter: new OTLPTraceExporter() });
      case 'console':
        return new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() });
      case 'jsonl': {
        const file = env.OTEL_EXPORTER_JSONL_FILE;
        if (!file) throw new Error('OTEL_TRACES_EXPORTER=jsonl needs OTEL_EXPORTER_JSONL_FILE');
        return new SimpleSpanProcessor({ exporter: new JsonLinesSpanExporter(file) });
      }
      default:
        throw new Error(`OTEL_TRACES_EXPORTER: unknown exporter "${name}" (otlp, console, jsonl, none)`);
    }
  });
}

const UNTRACED_PATHS = /^\/(healthz|readyz|metrics)(\?|$)/;

export interface TelemetryOptions {
  /**
   * Outgoing HTTP (undici) spans keep only the scheme, host and port of the
   * URL: the path and query become "REDACTED". For callers whose destinations
   * are customers' URLs (webhook deliveries), where a path or query often is
   * the receiver's credential (`https://hooks.example.com/T0/B0/XXXX?token=…`).
   */
  redactOutgoingUrls?: boolean;
}

/** The URL attributes of an outgoing span with path and query redacted (see TelemetryOptions). */
export function redactedUrlAttributes(origin: string, path: string): Attributes {
  let url: URL;
  try {
    url = new URL(path, origin);
  } catch {
    return {};
  }
  const query = url.search ? '?REDACTED' : '';
  return { 'url.full': `${url.origin}/REDACTED${query}`, 'url.path': '/REDACTED', 'url.query': query };
}

/**
 * Starts the OpenTelemetry SDK for `serviceName` when an exporter is
 * configured: W3C trace context, and spans for HTTP in and out (node:http,
 * undici), gRPC, Postgres and Redis. Postgres and Redis spans are only made
 * under another span (background polling is not traced); statements are
 * recorded without values, Redis commands by name only. Returns whether it started.
 */
export async function startTelemetry(
  serviceName: string,
  env: NodeJS.ProcessEnv = process.env,
  options: TelemetryOptions = {},
): Promise<boolean> {
  let spanProcessors: SpanProcessor[];
  try {
    spanProcessors = spanProcessorsFromEnv(env);
  } catch (err) {
    process.stderr.write(`${JSON.stringify({ level: 'fatal', service: serviceName, msg: `telemetry: ${(err as Error).message}` })}\n`);
    process.exit(1);
  }
  if (spanProcessors.length === 0 || env.OTEL_SDK_DISABLED === 'true') return false;

  // ESM bundles import their CommonJS dependencies (pg, ioredis, @grpc/grpc-js)
  // through the ESM loader, which require-hooks never see: the
  // import-in-the-middle loader wraps the modules the instrumentations hook.
  const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
  register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);

  const sdk = new NodeSDK({
    serviceName,
    spanProcessors,
    metricReaders: [], // metrics are prom-client's, on the admin port
    logRecordProcessors: [], // logs are pino's, on stdout
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? ''),
      }),
      new UndiciInstrumentation(
        options.redactOutgoingUrls ? { startSpanHook: (request) => redactedUrlAttributes(request.origin, request.path) } : {},
      ),
      // The authorization stream is long-lived: each batch item carries its own trace context instead.
      new GrpcInstrumentation({ ignoreGrpcMethods: ['AuthorizeStream', 'Check', 'Watch'] }),
      new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  });
  sdk.start();
  await waitForAllMessagesAcknowledged();
  setTelemetryShutdownHook(() => sdk.shutdown());
  return true;
}
