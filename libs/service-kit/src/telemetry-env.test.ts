import { describe, expect, it } from 'vitest';
import { exporterNamesFromEnv } from './telemetry';

describe('exporterNamesFromEnv', () => {
  it('is empty (no SDK loaded) when nothing is configured or the exporter is none', () => {
    expect(exporterNamesFromEnv({})).toEqual([]);
    expect(exporterNamesFromEnv({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual([]);
  });

  it('chooses OTLP when only an endpoint is set, and reads a comma list otherwise', () => {
    expect(exporterNamesFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual(['otlp']);
    expect(exporterNamesFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toEqual(['otlp']);
    expect(exporterNamesFromEnv({ OTEL_TRACES_EXPORTER: ' Console , jsonl', OTEL_EXPORTER_JSONL_FILE: '/tmp/spans.jsonl' })).toEqual([
      'console',
      'jsonl',
    ]);
  });

  it('refuses an unknown exporter and jsonl without its file', () => {
    expect(() => exporterNamesFromEnv({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(
      'OTEL_TRACES_EXPORTER: unknown exporter "zipkin" (otlp, console, jsonl, none)',
    );
    expect(() => exporterNamesFromEnv({ OTEL_TRACES_EXPORTER: 'jsonl' })).toThrow(
      'OTEL_TRACES_EXPORTER=jsonl needs OTEL_EXPORTER_JSONL_FILE',
    );
  });
});
