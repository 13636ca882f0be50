import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { CsvError, parse } from 'csv-parse';
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

/**
 * Counts the newlines of the bytes passing through, so the line a record starts on can be
 * found from csv-parse's byte offset (its own line counter counts a quoted CRLF twice). Only
 * offsets not yet consumed are kept, so memory is bounded by what the parser buffers.
 */
class LineIndex extends Transform {
  private offsets: number[] = [];
  private head = 0;
  private passed = 0;
  private seen = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let i = chunk.indexOf(10);
    while (i !== -1) {
      this.offsets.push(this.seen + i);
      i = chunk.indexOf(10, i + 1);
    }
    this.seen += chunk.length;
    cb(null, chunk);
  }

  /** Newlines strictly before byte `offset` (offsets must not decrease between calls). */
  newlinesBefore(offset: number): number {
    while (this.head < this.offsets.length && (this.offsets[this.head] as number) < offset) {
      this.head++;
      this.passed++;
    }
    if (this.head > 4096) {
      this.offsets = this.offsets.slice(this.head);
      this.head = 0;
    }
    return this.passed;
  }
}

/**
 * Streams an ECHO CSV file: comma-separated, `"` quoting with doubled quotes, CRLF or LF, fields
 * with line breaks inside quotes. The header is checked first: every column in `reads` must be
 * present (by name; order and extra columns do not matter), else a FileError naming the column.
 */
export async function* readCsv(input: Readable, origin: string, reads: readonly string[]): AsyncGenerator<CsvRow> {
  const index = new LineIndex();
  const parser = parse({
    bom: true,
    relax_column_count: true,
    skip_empty_lines: true,
    info: true,
    record_delimiter: ['\r\n', '\n'],
    max_record_size: 1 << 20,
  });
  input.once('error', (err) => parser.destroy(err));
  index.once('error', (err) => parser.destroy(err));
  input.pipe(index).pipe(parser);
  let positions: Map<string, number> | undefined;
  let width = 0;
  let prevEnd = 0;
  let prevEmpty = 0;
  try {
    for await (const item of parser as AsyncIterable<{ record: string[]; info: { bytes: number; empty_lines: number } }>) {
      const { record, info } = item;
      const line = index.newlinesBefore(prevEnd) + 1 + (info.empty_lines - prevEmpty);
      prevEnd = info.bytes;
      prevEmpty = info.empty_lines;
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
    if (err instanceof CsvError) throw new FileError(`${origin}: malformed CSV: ${err.message}`);
    throw new FileError(`${origin}: ${(err as Error).message}`);
  } finally {
    input.unpipe();
    input.destroy();
  }
  if (!positions) throw new FileError(`${origin}: empty file (no header line)`);
}
