import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * docs/architecture.md is the map a newcomer reads first: it names every library (libs/*) in its
 * library table and links every ADR (docs/adr/*) from its decisions table, so a new library or
 * decision cannot land without a line there, and a line cannot outlive what it names.
 */
const root = resolve(import.meta.dirname, '../..');
const page = readFileSync(join(root, 'docs/architecture.md'), 'utf8');

/** The first cell of each row of the markdown table under `heading` (to the next heading). */
function firstCells(heading: string): string[] {
  const start = page.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/architecture.md has no "## ${heading}" section`);
  const next = page.indexOf('\n## ', start + 1);
  const section = page.slice(start, next < 0 ? undefined : next);
  return section
    .split('\n')
    .filter((l) => l.startsWith('|') && !/^\|\s*-/.test(l))
    .map((l) => l.split('|')[1]!.trim())
    .slice(1);
}

const LIBS = readdirSync(join(root, 'libs')).filter((l) => existsSync(join(root, 'libs', l, 'package.json')));
const ADRS = readdirSync(join(root, 'docs/adr')).filter((f) => /^\d{4}-.*\.md$/.test(f));

describe('docs/architecture.md', () => {
  it('has one row per library in its library table, and no row for a library that does not exist', () => {
    const rows = firstCells('The system').filter((c) => c.startsWith('`libs/'));
    expect(rows.sort()).toEqual(LIBS.map((l) => `\`libs/${l}\``).sort());
  });

  it('links every ADR from its decisions table, and links none that does not exist', () => {
    const linked = firstCells('Decisions').map((c) => /^\[(\d{4})\]\(adr\/([^)]+)\)$/.exec(c)?.slice(1) ?? [c]);
    expect(linked.map(([, file]) => file).sort()).toEqual([...ADRS].sort());
    for (const [number, file] of linked) expect(file?.startsWith(`${number}-`)).toBe(true);
  });
});
