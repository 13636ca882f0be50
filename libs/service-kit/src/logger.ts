import { trace } from '@opentelemetry/api';
import { type Logger, type LoggerOptions, pino } from 'pino';

export type { Logger };

/**
 * Paths that may carry secrets. Logged values are replaced, never printed:
 * API keys, webhook secrets and signatures, internal auth headers, passwords.
 */
export const REDACT_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers["x-fcd-account"]',
  'req.headers["x-admin-token"]',
  'req.headers["x-service-signature"]',
  'headers["x-api-key"]',
  'headers.authorization',
  'headers["x-service-signature"]',
  'apiKey',
  'api_key',
  'secret',
  'token',
  'password',
  '*.apiKey',
  '*.api_key',
  '*.secret',
  '*.token',
  '*.password',
];

export interface LoggerSettings {
  service: string;
  level?: string;
  /** Where to write (tests capture logs); defaults to stdout. */
  destination?: NodeJS.WritableStream;
}

export function createLogger(settings: LoggerSettings): Logger {
  const options: LoggerOptions = {
    level: settings.level ?? 'info',
    base: { service: settings.service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
    mixin: traceFields,
  };
  return settings.destination ? pino(options, settings.destination as pino.DestinationStream) : pino(options);
}

/** trace_id/span_id of the active span, so a log line leads to its trace (nothing when not tracing). */
export function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return trace.isSpanContextValid(span.spanContext()) ? { trace_id: traceId, span_id: spanId } : {};
}

/** Removes anything that looks like an API key or webhook secret from free text. */
export function scrubSecrets(text: string): string {
  return text.replace(/fcd_[A-Za-z0-9]{4,}/g, 'fcd_[redacted]').replace(/whsec_[A-Za-z0-9+/_=-]{4,}/g, 'whsec_[redacted]');
}
