import { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FileError, readCsv } from './csv';

/** The bytes as a stream cut at the given offsets. */
function streamOf(bytes: Buffer, cuts: number[] = []): Readable {
  const at = [...new Set(cuts.filter((c) => c > 0 && c < bytes.length))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const c of [...at, bytes.length]) {
    chunks.push(bytes.subarray(from, c));
    from = c;
  }
  return Readable.from(chunks, { objectMode: false });
}

async function rowsOf(text: string | Buffer, cuts?: number[], reads: string[] = ['A']) {
  const out: Array<{ line: number; cells: Array<string | undefined>; problem?: string }> = [];
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  for await (const row of readCsv(streamOf(bytes, cuts), 'f.csv', reads)) {
    out.push({
      line: row.line,
      cells: ['A', 'B', 'C'].map((c) => row.get(c)),
      ...(row.fieldCountProblem ? { problem: row.fieldCountProblem } : {}),
    });
  }
  return out;
}

async function errorOf(text: string, cuts?: number[]): Promise<string> {
  try {
    await rowsOf(text, cuts);
  } catch (err) {
    expect(err).toBeInstanceOf(FileError);
    return (err as Error).message;
  }
  throw new Error('no error');
}

// A file with every case the ECHO files have: CRLF line ends, quoted commas, doubled quotes, a
// quoted CRLF and a quoted LF (each one more line), an empty line, a blank cell, a short record,
// multi-byte UTF-8, no line break at the end.
const FILE =
  '\uFEFFA,B,C\r\n' + '1,"x, y","say ""hi"""\r\n' + '2,"two\r\nlines",z\r\n' + '\r\n' + '3,"lf\nonly",\r\n' + '4,Ünïcödé ✓\r\n' + '5,b,c';

const EXPECTED = [
  { line: 2, cells: ['1', 'x, y', 'say "hi"'] },
  { line: 3, cells: ['2', 'two\r\nlines', 'z'] },
  { line: 6, cells: ['3', 'lf\nonly', ''] },
  { line: 8, cells: ['4', 'Ünïcödé ✓', undefined], problem: 'has 2 fields, the header has 3' },
  { line: 9, cells: ['5', 'b', 'c'] },
];

describe('readCsv', () => {
  it('reads records with the line each starts on (quoted line breaks and empty lines counted), a BOM dropped', async () => {
    expect(await rowsOf(FILE)).toEqual(EXPECTED);
  });

  it('gives the same records and lines however the bytes are cut into chunks (one byte at a time included)', async () => {
    const bytes = Buffer.from(FILE, 'utf8');
    expect(
      await rowsOf(
        bytes,
        Array.from({ length: bytes.length }, (_, i) => i),
      ),
    ).toEqual(EXPECTED);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), async (cuts) => {
        expect(await rowsOf(bytes, cuts)).toEqual(EXPECTED);
      }),
      { numRuns: 200 },
    );
  });

  it('reads LF files as CRLF ones', async () => {
    expect(await rowsOf('A,B\n1,"a\nb"\n\n2,c\n', [], ['A', 'B'])).toEqual([
      { line: 2, cells: ['1', 'a\nb', undefined] },
      { line: 5, cells: ['2', 'c', undefined] },
    ]);
  });

  it('refuses a file with an unclosed quote, naming the line the record starts on', async () => {
    expect(await errorOf('A,B\r\n1,x\r\n2,"open\r\n3,y\r\n')).toBe('f.csv: malformed CSV: line 3: Quoted field unterminated');
  });

  it('refuses text after a closing quote', async () => {
    expect(await errorOf('A,B\r\n1,"x"y\r\n2,z\r\n')).toBe('f.csv: malformed CSV: line 2: Trailing quote on quoted field is malformed');
  });

  it('refuses a record longer than 1 MiB (a runaway quote) without reading the rest of the file', async () => {
    const body = `A,B\r\n1,"${'x'.repeat(600_000)}\r\n${'y'.repeat(600_000)}\r\n`;
    const cuts = Array.from({ length: 40 }, (_, i) => i * 65_536);
    expect(await errorOf(body, cuts)).toBe('f.csv: malformed CSV: line 2: a record longer than 1048576 characters (an unclosed quote?)');
  });

  it('refuses a header without a column it reads, and an empty file', async () => {
    await expect(rowsOf('B,C\r\n1,2\r\n')).rejects.toThrow(new FileError('f.csv: header has no column A (missing or renamed)'));
    await expect(rowsOf('')).rejects.toThrow(new FileError('f.csv: empty file (no header line)'));
  });
});
