import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { csvRows, ndjsonRows, type SourceRow } from './row-source';

async function all(gen: AsyncGenerator<SourceRow>): Promise<SourceRow[]> {
  const out: SourceRow[] = [];
  for await (const r of gen) out.push(r);
  return out;
}

describe('ndjsonRows', () => {
  it('numbers lines from 1, skips blank lines, and reports unreadable ones', async () => {
    const rows = await all(ndjsonRows('{"a":1}\n\n  \nnope\n[1]\n{"b":2}'));
    expect(rows).toEqual([
      { line: 1, raw: { a: 1 } },
      { line: 4, problems: [{ field: 'line', message: 'is not valid JSON' }] },
      { line: 5, problems: [{ field: 'line', message: 'must be a JSON object' }] },
      { line: 6, raw: { b: 2 } },
    ]);
  });

  it('reassembles lines split across stream chunks', async () => {
    const rows = await all(ndjsonRows(Readable.from([Buffer.from('{"a":'), Buffer.from('1}\n{"a"'), Buffer.from(':2}\n')])));
    expect(rows).toEqual([
      { line: 1, raw: { a: 1 } },
      { line: 2, raw: { a: 2 } },
    ]);
  });
});

describe('csvRows', () => {
  it('maps cells to header fields and counts the header as line 1', async () => {
    const rows = await all(csvRows('\uFEFFregistry_id,name,state\n1,"Smith, Jones",TX\n2,b\n', 'facilities'));
    expect(rows).toEqual([
      { line: 2, raw: { registry_id: '1', name: 'Smith, Jones', state: 'TX' } },
      { line: 3, problems: [{ field: 'line', message: 'has 2 columns, the header has 3' }] },
    ]);
  });

  it('stops at a header with unknown or repeated columns', async () => {
    const rows = await all(csvRows('registry_id,name,name,size\n1,a,b,c\n', 'facilities'));
    expect(rows).toEqual([
      {
        line: 1,
        fatal: true,
        problems: [
          { field: 'size', message: 'is not a known column' },
          { field: 'name', message: 'appears more than once in the header' },
        ],
      },
    ]);
  });
});
