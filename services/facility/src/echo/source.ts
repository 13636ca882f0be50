import { createReadStream, createWriteStream, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import { FILE_SPECS } from './files';
import type { EchoFileName } from './layouts';

/** A problem with the download as a whole (unreadable, corrupt, unreachable): one clear line. */
export class SourceError extends Error {}

export interface SourceEntry {
  file: EchoFileName;
  /** Where it was found, for messages: `case_downloads.zip:CASE_FACILITIES.csv` or a path. */
  origin: string;
  /** The zip it was read from (`case_downloads.zip`), or null for a plain CSV file. */
  archive: string | null;
  /**
   * The file's own date: the zip entry's modification time (its Info-ZIP or NTFS extended
   * timestamp, which is UTC; else the MS-DOS date and time, which carry no zone, read as UTC),
   * or a plain CSV file's modification time.
   */
  fileDate: Date | null;
  /** A fresh stream of the file's bytes (called again when a step is retried). */
  open(): Promise<Readable>;
}

export interface EchoSource {
  entries: Map<EchoFileName, SourceEntry>;
  /** Files in the download this adapter does not read (listed in the summary). */
  ignored: string[];
  close(): void;
}

/** The files the adapter reads, by upper-cased name (ECHO's own names are upper case). */
const KNOWN = new Map(FILE_SPECS.map((s) => [s.file.toUpperCase(), s.file]));

function zipError(name: string, err: Error): SourceError {
  return new SourceError(`${name}: not a readable zip archive (truncated or corrupt): ${err.message}`);
}

function openZip(path: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(path, { lazyEntries: true, autoClose: false, validateEntrySizes: true }, (err, zip) => {
      if (err || !zip) reject(zipError(basename(path), err ?? new Error('no archive')));
      else resolve(zip);
    });
  });
}

function readEntries(zip: yauzl.ZipFile, name: string): Promise<yauzl.Entry[]> {
  return new Promise((resolve, reject) => {
    const out: yauzl.Entry[] = [];
    zip.on('entry', (e: yauzl.Entry) => {
      out.push(e);
      zip.readEntry();
    });
    zip.once('end', () => resolve(out));
    zip.once('error', (err: Error) => reject(zipError(name, err)));
    zip.readEntry();
  });
}

/**
 * A stream of an entry that ends in a SourceError (not a raw zlib/yauzl error) when the archive
 * is corrupt: a bad deflate stream, a size mismatch, a truncated body.
 */
function entryStream(zip: yauzl.ZipFile, entry: yauzl.Entry, origin: string): Promise<Readable> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) return reject(new SourceError(`${origin}: corrupt zip entry: ${(err ?? new Error('no stream')).message}`));
      const out = new PassThrough();
      stream.once('error', (e: Error) => out.destroy(new SourceError(`${origin}: corrupt zip entry: ${e.message}`)));
      out.once('close', () => stream.destroy());
      stream.pipe(out);
      resolve(out);
    });
  });
}

async function addZip(path: string, into: EchoSource, zips: yauzl.ZipFile[]): Promise<void> {
  const name = basename(path);
  const zip = await openZip(path);
  zips.push(zip);
  for (const entry of await readEntries(zip, name)) {
    if (entry.fileName.endsWith('/')) continue;
    const file = KNOWN.get(basename(entry.fileName).toUpperCase());
    const origin = `${name}:${entry.fileName}`;
    if (!file) into.ignored.push(origin);
    else add(into, { file, origin, archive: name, fileDate: entryDate(entry), open: () => entryStream(zip, entry, origin) });
  }
}

/** A zip entry's modification time (see SourceEntry.fileDate); null when it is not a valid date. */
function entryDate(entry: yauzl.Entry): Date | null {
  // yauzl 3 takes the zone of a bare MS-DOS time as an option (its type definitions predate it).
  const d = (entry as unknown as { getLastModDate(o: { timezone: 'UTC' }): Date }).getLastModDate({ timezone: 'UTC' });
  return Number.isFinite(d.getTime()) ? d : null;
}

function add(into: EchoSource, entry: SourceEntry): void {
  const seen = into.entries.get(entry.file);
  if (seen) throw new SourceError(`${entry.file} is in the download twice: ${seen.origin} and ${entry.origin}`);
  into.entries.set(entry.file, entry);
}

function addCsv(path: string, into: EchoSource): void {
  const file = KNOWN.get(basename(path).toUpperCase());
  if (!file) into.ignored.push(basename(path));
  else {
    const mtime = statSync(path).mtime;
    add(into, {
      file,
      origin: basename(path),
      archive: null,
      fileDate: Number.isFinite(mtime.getTime()) ? mtime : null,
      open: async () => createReadStream(path),
    });
  }
}

/** Downloads an http(s) URL to a temporary file (streamed, never held in memory). */
async function download(url: string, dir: string, fetchImpl: typeof fetch): Promise<string> {
  let res: Response;
  try {
    res = await fetchImpl(url, { redirect: 'follow' });
  } catch (err) {
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    throw new SourceError(`GET ${url}: ${cause ?? (err as Error).message}`);
  }
  if (!res.ok || !res.body) throw new SourceError(`GET ${url}: HTTP ${res.status}`);
  const name = basename(new URL(url).pathname) || 'download.zip';
  const path = join(dir, name.toLowerCase().endsWith('.zip') ? name : `${name}.zip`);
  try {
    await pipeline(Readable.fromWeb(res.body as never), createWriteStream(path));
  } catch (err) {
    throw new SourceError(`GET ${url}: download interrupted: ${(err as Error).message}`);
  }
  return path;
}

/**
 * Opens an ECHO download: a folder (of the zips as published and/or the CSV files), one zip,
 * one CSV file, or an http(s) URL of a zip (downloaded to a temporary file first). Zip entries
 * are read as streams, never extracted.
 */
export async function openSource(from: string, opts: { fetch?: typeof fetch } = {}): Promise<EchoSource> {
  const zips: yauzl.ZipFile[] = [];
  let tmp: string | undefined;
  const source: EchoSource = {
    entries: new Map(),
    ignored: [],
    close() {
      for (const z of zips) z.close();
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    },
  };
  try {
    // Several sources separated by commas (e.g. the EPA's zip URLs) are one download.
    for (const item of from
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''))
      await addOne(item);
    if (source.entries.size === 0) throw new SourceError(`${from}: no ECHO download files found (expected e.g. ECHO_EXPORTER.csv)`);
    return source;
  } catch (err) {
    source.close();
    throw err;
  }

  async function addOne(from: string): Promise<void> {
    if (/^https?:\/\//i.test(from)) {
      tmp ??= mkdtempSync(join(tmpdir(), 'echo-sync-'));
      await addZip(await download(from, tmp, opts.fetch ?? fetch), source, zips);
    } else {
      let st: ReturnType<typeof statSync>;
      try {
        st = statSync(from);
      } catch {
        throw new SourceError(`${from}: no such file or folder`);
      }
      if (st.isDirectory()) {
        for (const name of readdirSync(from).sort()) {
          const path = join(from, name);
          if (!statSync(path).isFile()) continue;
          if (name.toLowerCase().endsWith('.zip')) await addZip(path, source, zips);
          else if (name.toLowerCase().endsWith('.csv')) addCsv(path, source);
          else source.ignored.push(name);
        }
      } else if (from.toLowerCase().endsWith('.zip')) await addZip(from, source, zips);
      else if (from.toLowerCase().endsWith('.csv')) addCsv(from, source);
      else throw new SourceError(`${from}: not a folder, .zip or .csv file`);
    }
  }
}
