import { appendFileSync } from 'node:fs';
import type { Attributes } from '@opentelemetry/api';
import type { ExportResult, ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
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
 * - Nothing set → no SDK at all: no spans, no cost on the hot path (trace context is not propagated),
 *   and none of the SDK's modules is loaded (they are imported only once an exporter is configured:
 *   loading them costs a process about 30 MiB of resident memory).
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

/** An OpenTelemetry HrTime ([seconds, nanoseconds]) in microseconds, as @opentelemetry/core's hrTimeToMicroseconds. */
const microseconds = ([seconds, nanos]: [number, number]): number => Math.round(seconds * 1e6 + nanos / 1e3);

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
    startUs: microseconds(span.startTime),
    durationUs: microseconds(span.duration),
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
  /** `codes`: @opentelemetry/core's ExportResultCode (passed in: this module loads no SDK module until needed). */
  constructor(
    private readonly file: string,
    private readonly codes: typeof ExportResultCode,
  ) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.stopped) {
      resultCallback({ code: this.codes.FAILED, error: new Error('exporter shut down') });
      return;
    }
    try {
      if (spans.length > 0) appendFileSync(this.file, spans.map((s) => `${JSON.stringify(toSpanRecord(s))}\n`).join(''));
      resultCallback({ code: this.codes.SUCCESS });
    } catch (err) {
      resultCallback({ code: this.codes.FAILED, error: err as Error });
    }
  }

  async forceFlush(): Promise<void> {}

  async shutdown(): Promise<void> {
    this.stopped = true;
  }
}

const EXPORTERS = ['otlp', 'console', 'jsonl'] as const;
type ExporterName = (typeof EXPORTERS)[number];

/** The exporters the environment names; empty = telemetry off. Throws on a value it does not know. */
export function exporterNamesFromEnv(env: NodeJS.ProcessEnv = process.env): ExporterName[] {
  let names = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (names.length === 0 && (env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)) names = ['otlp'];
  if (names.includes('none')) return [];
  return names.map((name) => {
    if (!(EXPORTERS as readonly string[]).includes(name)) {
      throw new Error(`OTEL_TRACES_EXPORTER: unknown exporter "${name}" (otlp, console, jsonl, none)`);
    }
    if (name === 'jsonl' && !env.OTEL_EXPORTER_JSONL_FILE) throw new Error('OTEL_TRACES_EXPORTER=jsonl needs OTEL_EXPORTER_JSONL_FILE');
    return name as ExporterName;
  });
}

/** The span processors of the named exporters, loading only the SDK modules they need. */
async function spanProcessorsFor(names: ExporterName[], env: NodeJS.ProcessEnv): Promise<SpanProcessor[]> {
  const { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace');
  const processors: SpanProcessor[] = [];
  for (const name of names) {
    if (name === 'otlp') {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
      processors.push(new BatchSpanProcessor({ exporter: new OTLPTraceExporter() }));
    } else if (name === 'console') {
      processors.push(new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() }));
    } else {
      const { ExportResultCode } = await import('@opentelemetry/core');
      processors.push(
        new SimpleSpanProcessor({ exporter: new JsonLinesSpanExporter(env.OTEL_EXPORTER_JSONL_FILE as string, ExportResultCode) }),
      );
    }
  }
  return processors;
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
  let names: ExporterName[];
  try {
    names = exporterNamesFromEnv(env);
  } catch (err) {
    process.stderr.write(`${JSON.stringify({ level: 'fatal', service: serviceName, msg: `telemetry: ${(err as Error).message}` })}\n`);
    process.exit(1);
  }
  if (names.length === 0 || env.OTEL_SDK_DISABLED === 'true') return false;

  const [
    { register },
    { createAddHookMessageChannel },
    { NodeSDK },
    { HttpInstrumentation },
    { UndiciInstrumentation },
    { GrpcInstrumentation },
    { PgInstrumentation },
    { IORedisInstrumentation },
  ] = await Promise.all([
    import('node:module'),
    import('import-in-the-middle'),
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-undici'),
    import('@opentelemetry/instrumentation-grpc'),
    import('@opentelemetry/instrumentation-pg'),
    import('@opentelemetry/instrumentation-ioredis'),
  ]);
  const spanProcessors = await spanProcessorsFor(names, env);

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
