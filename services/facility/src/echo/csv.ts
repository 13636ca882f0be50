import type { Readable } from 'node:stream';
import Papa from 'papaparse';
import { SourceError } from './source';

/** A file that cannot be loaded at all (bad header, malformed CSV): one line naming it; nothing of it is written. */
export class FileError extends Error {}

export interface CsvRow {
  /** The line the record starts on (1 = the header). */
  line: number;
  /** Cells by column name (only the columns asked for). */
  get(column: string): string | undefined;
  /** Set when the record's field count differs from the header's. */
  fieldCountProblem?: string;
}

/** The longest record accepted (a runaway quote would otherwise read the rest of the file as one field). */
const MAX_RECORD_CHARS = 1 << 20;

/** A CSV syntax error at a line (an unclosed quote, text after a closing quote, an over-long record). */
class CsvSyntaxError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`line ${line}: ${message}`);
  }
}

/** Line breaks inside a record's fields (a quoted field may hold some). */
function innerLineBreaks(record: string[]): number {
  let n = 0;
  for (const field of record) {
    let i = field.indexOf('\n');
    while (i !== -1) {
      n++;
      i = field.indexOf('\n', i + 1);
    }
  }
  return n;
}

/**
 * The records of a CSV byte stream (UTF-8, a BOM dropped) with the line each starts on, empty
 * lines skipped. Parsed by papaparse's core parser (about three times csv-parse's speed on the
 * Exporter's 133 columns: 0.8 s against 2.4–2.8 s for 100,000 records,
 * docs/benchmarks/history/2026-11-27.md, "ECHO sync"), fed whole lines: the text after the last
 * line break waits for the next chunk, and so does a record still open at the end of the fed text
 * (a quoted field with line breaks), up to MAX_RECORD_CHARS. Lines are counted as the records go:
 * one per record, plus the line breaks inside its fields, plus one per empty line.
 */
async function* csvRecords(input: AsyncIterable<Buffer>): AsyncGenerator<{ record: string[]; line: number }> {
  const decoder = new TextDecoder('utf-8');
  let parser: Papa.Parser | undefined;
  let pending = '';
  let line = 1;
  function* records(text: string, final: boolean): Generator<{ record: string[]; line: number }, number> {
    // The line break is the first line's own (CRLF, as ECHO publishes, or LF).
    parser ??= new Papa.Parser({ delimiter: ',', quoteChar: '"', newline: /^[^\n]*\r\n/.test(text) ? '\r\n' : '\n' });
    const result = parser.parse(text, 0, !final) as Papa.ParseResult<string[]>;
    const error = result.errors[0];
    // Only a quoted field can hold a line break: text without quotes needs no count per record.
    const quoted = text.includes('"');
    for (const [i, record] of result.data.entries()) {
      if (error && i >= (error.row ?? 0)) break;
      const start = line;
      line += quoted ? 1 + innerLineBreaks(record) : 1;
      if (record.length === 1 && record[0] === '') continue;
      yield { record, line: start };
    }
    if (error) throw new CsvSyntaxError(line, error.message);
    return result.meta.cursor;
  }
  for await (const chunk of input) {
    pending += decoder.decode(chunk, { stream: true });
    const end = pending.lastIndexOf('\n') + 1;
    if (end > 0) {
      const text = pending.slice(0, end);
      const used = yield* records(text, false);
      pending = text.slice(used) + pending.slice(end);
    }
    if (pending.length > MAX_RECORD_CHARS)
      throw new CsvSyntaxError(line, `a record longer than ${MAX_RECORD_CHARS} characters (an unclosed quote?)`);
  }
  pending += decoder.decode();
  if (pending !== '') yield* records(pending, true);
}

/**
 * Streams an ECHO CSV file: comma-separated, `"` quoting with doubled quotes, CRLF or LF, fields
 * with line breaks inside quotes. The header is checked first: every column in `reads` must be
 * present (by name; order and extra columns do not matter), else a FileError naming the column.
 */
export async function* readCsv(input: Readable, origin: string, reads: readonly string[]): AsyncGenerator<CsvRow> {
  let positions: Map<string, number> | undefined;
  let width = 0;
  try {
    for await (const { record, line } of csvRecords(input)) {
      if (!positions) {
        const header = record.map((h) => h.trim());
        positions = new Map(header.map((h, i) => [h, i]));
        for (const col of reads) {
          if (!positions.has(col)) throw new FileError(`${origin}: header has no column ${col} (missing or renamed)`);
        }
        width = header.length;
        continue;
      }
      const pos = positions;
      const row: CsvRow = { line, get: (column) => record[pos.get(column) as number] };
      if (record.length !== width) row.fieldCountProblem = `has ${record.length} fields, the header has ${width}`;
      yield row;
    }
  } catch (err) {
    if (err instanceof FileError || err instanceof SourceError) throw err;
    if (err instanceof CsvSyntaxError) throw new FileError(`${origin}: malformed CSV: ${err.message}`);
    throw new FileError(`${origin}: ${(err as Error).message}`);
  } finally {
    input.destroy();
  }
  if (!positions) throw new FileError(`${origin}: empty file (no header line)`);
}
