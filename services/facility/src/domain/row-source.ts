import { Readable } from 'node:stream';
import type { FieldProblem } from '@fcd/service-kit/pure';
import { parse } from 'csv-parse';
import { FIELDS, type RecordKind } from './records';

/**
 * Turns NDJSON or CSV text into raw rows with their line numbers. A line that
 * cannot be read (bad JSON, wrong column count) becomes a row failure with its
 * line; the rows around it are still produced.
 */
export type SourceRow = { line: number; raw: Record<string, unknown> } | { line: number; problems: FieldProblem[]; fatal?: boolean };

export type FileFormat = 'ndjson' | 'csv';

export function formatOfPath(path: string): FileFormat | undefined {
  const lower = path.toLowerCase();
  if (lower.endsWith('.ndjson') || lower.endsWith('.jsonl')) return 'ndjson';
  if (lower.endsWith('.csv')) return 'csv';
  return undefined;
}

function toStream(input: Readable | string): Readable {
  return typeof input === 'string' ? Readable.from([input]) : input;
}

/** NDJSON: one JSON object per line; blank lines are skipped. */
export async function* ndjsonRows(input: Readable | string): AsyncGenerator<SourceRow> {
  let line = 0;
  let rest = '';
  const handle = (text: string): SourceRow | undefined => {
    line++;
    const t = text.trim();
    if (t === '') return undefined;
    let value: unknown;
    try {
      value = JSON.parse(t);
    } catch {
      return { line, problems: [{ field: 'line', message: 'is not valid JSON' }] };
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return { line, problems: [{ field: 'line', message: 'must be a JSON object' }] };
    }
    return { line, raw: value as Record<string, unknown> };
  };
  for await (const chunk of toStream(input)) {
    rest += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
    let nl = rest.indexOf('\n');
    while (nl >= 0) {
      const row = handle(rest.slice(0, nl));
      rest = rest.slice(nl + 1);
      if (row) yield row;
      nl = rest.indexOf('\n');
    }
  }
  if (rest !== '') {
    const row = handle(rest);
    if (row) yield row;
  }
}

/**
 * CSV with a header row naming the fields (RFC 4180 quoting, optional BOM).
 * Line numbers count the header as line 1. Unknown or missing-required header
 * columns stop the file with one error at line 1.
 */
export async function* csvRows(input: Readable | string, kind: RecordKind): AsyncGenerator<SourceRow> {
  const parser = toStream(input).pipe(parse({ bom: true, relax_column_count: true, skip_empty_lines: true, info: true, trim: true }));
  let header: string[] | undefined;
  try {
    for await (const item of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      const { record, info } = item;
      if (!header) {
        header = record.map((h) => h.trim());
        const unknown = header.filter((h) => !FIELDS[kind].includes(h));
        const dupes = header.filter((h, i) => header?.indexOf(h) !== i);
        const problems: FieldProblem[] = [
          ...unknown.map((h) => ({ field: h, message: 'is not a known column' })),
          ...[...new Set(dupes)].map((h) => ({ field: h, message: 'appears more than once in the header' })),
        ];
        if (problems.length > 0) {
          yield { line: info.lines, problems, fatal: true };
          return;
        }
        continue;
      }
      if (record.length !== header.length) {
        yield {
          line: info.lines,
          problems: [{ field: 'line', message: `has ${record.length} columns, the header has ${header.length}` }],
        };
        continue;
      }
      const raw: Record<string, unknown> = {};
      header.forEach((h, i) => {
        raw[h] = record[i];
      });
      yield { line: info.lines, raw };
    }
  } catch (err) {
    const e = err as { lines?: number; message?: string };
    yield { line: e.lines ?? 0, problems: [{ field: 'line', message: `is not valid CSV (${e.message ?? 'parse error'})` }], fatal: true };
  }
}

export function rowsOf(format: FileFormat, input: Readable | string, kind: RecordKind): AsyncGenerator<SourceRow> {
  return format === 'csv' ? csvRows(input, kind) : ndjsonRows(input);
}
