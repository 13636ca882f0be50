import { createWriteStream, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import yazl from 'yazl';
import { openSource } from './source';

/**
 * The file's own date of a zip entry (GET /v1/sources `file_date`): the extended timestamp when
 * the entry has one, else its MS-DOS date and time read as UTC, whatever the process's time zone.
 */
const previousTz = process.env.TZ;
let zipPath: string;

beforeAll(async () => {
  // A zone far from UTC, so reading the MS-DOS time as local time would show.
  process.env.TZ = 'Pacific/Auckland';
  zipPath = join(mkdtempSync(join(tmpdir(), 'echo-source-')), 'case_downloads.zip');
  const zip = new yazl.ZipFile();
  const header = 'CASE_NUMBER\r\n';
  zip.addBuffer(Buffer.from(header), 'CASE_ENFORCEMENTS.csv', { mtime: new Date('2026-11-16T11:05:07.000Z') });
  // MS-DOS fields are written from the Date's local fields: 2026-11-20 03:04:06.
  zip.addBuffer(Buffer.from(header), 'CASE_FACILITIES.csv', { mtime: new Date(2026, 10, 20, 3, 4, 6), forceDosTimestamp: true });
  zip.end();
  await new Promise<void>((resolve, reject) => {
    zip.outputStream
      .pipe(createWriteStream(zipPath))
      .once('close', () => resolve())
      .once('error', reject);
  });
});

afterAll(() => {
  if (previousTz === undefined) delete process.env.TZ;
  else process.env.TZ = previousTz;
});

describe('openSource: each entry with its zip and its own date', () => {
  it('an extended (UTC) timestamp to the second; an MS-DOS time read as UTC', async () => {
    const source = await openSource(zipPath);
    try {
      const enforcements = source.entries.get('CASE_ENFORCEMENTS.csv');
      const facilities = source.entries.get('CASE_FACILITIES.csv');
      expect([enforcements?.archive, enforcements?.fileDate?.toISOString()]).toEqual(['case_downloads.zip', '2026-11-16T11:05:07.000Z']);
      expect([facilities?.archive, facilities?.fileDate?.toISOString()]).toEqual(['case_downloads.zip', '2026-11-20T03:04:06.000Z']);
    } finally {
      source.close();
    }
  });
});
