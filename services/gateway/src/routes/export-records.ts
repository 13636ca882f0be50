const NEWLINE = 0x0a;
const QUOTE = 0x22;

/**
 * Cuts an export page's body, as it is read, at its record boundaries (docs/api.md, "Bulk export":
 * no record is ever half sent). Each chunk read gives back the pieces that end on a record's
 * boundary, without copying them (subarrays of the chunks read); the bytes after the last boundary
 * wait for the next chunk. What waits is at most the rest of one record, never a page.
 *
 * NDJSON: a record ends at `\n` (JSON escapes a newline inside a string). CSV: at `\n` outside
 * quotes (RFC 4180 doubles a quote inside a quoted field, so quote parity tells inside from out).
 */
export class RecordCut {
  /** Records handed on (NDJSON rows; for CSV the header row counts too). */
  records = 0;
  /** The bytes of the last whole record handed on (without its `\n`), when it is wanted. */
  private lastRecord: Buffer | undefined;
  private tail: Buffer[] = [];
  private inQuote = false;

  constructor(
    private readonly csv: boolean,
    /** Keep the last whole record (the NDJSON resume line needs its id). */
    private readonly keepLast = !csv,
  ) {}

  /** The pieces of `chunk` (and of what waited before it) that end on a record boundary, in order. */
  take(chunk: Buffer): Buffer[] {
    const end = this.csv ? this.lastCsvBoundary(chunk) : this.lastNdjsonBoundary(chunk);
    if (end < 0) {
      this.tail.push(chunk);
      return [];
    }
    const head = chunk.subarray(0, end + 1);
    if (this.keepLast) this.keep(head);
    const pieces = this.tail.length > 0 ? [...this.tail, head] : [head];
    this.tail = end + 1 < chunk.length ? [chunk.subarray(end + 1)] : [];
    return pieces;
  }

  /** True when bytes after the last record boundary are waiting (a page that ends so was cut short). */
  get partial(): boolean {
    return this.tail.length > 0;
  }

  /** The id of the last whole record handed on (NDJSON), or undefined when there is none. */
  lastId(): string | undefined {
    if (!this.lastRecord) return undefined;
    const id = (JSON.parse(this.lastRecord.toString('utf8')) as { id?: unknown }).id;
    return typeof id === 'string' ? id : undefined;
  }

  private keep(head: Buffer): void {
    const last = head.length - 1;
    const before = head.lastIndexOf(NEWLINE, last - 1);
    // The last record lies within this chunk (the usual case: chunks hold many records) or began in
    // the bytes that waited: then it is copied, once, out of them.
    this.lastRecord =
      before >= 0 || this.tail.length === 0 ? head.subarray(before + 1, last) : Buffer.concat([...this.tail, head.subarray(0, last)]);
  }

  private lastNdjsonBoundary(chunk: Buffer): number {
    let last = -1;
    let at = chunk.indexOf(NEWLINE);
    while (at >= 0) {
      this.records++;
      last = at;
      at = chunk.indexOf(NEWLINE, at + 1);
    }
    return last;
  }

  private lastCsvBoundary(chunk: Buffer): number {
    let last = -1;
    let at = 0;
    let quote = chunk.indexOf(QUOTE);
    for (;;) {
      if (this.inQuote) {
        if (quote < 0) return last;
        this.inQuote = false;
        at = quote + 1;
        quote = chunk.indexOf(QUOTE, at);
        continue;
      }
      const newline = chunk.indexOf(NEWLINE, at);
      if (quote >= 0 && (newline < 0 || quote < newline)) {
        this.inQuote = true;
        at = quote + 1;
        quote = chunk.indexOf(QUOTE, at);
        continue;
      }
      if (newline < 0) return last;
      this.records++;
      last = newline;
      at = newline + 1;
    }
  }
}
