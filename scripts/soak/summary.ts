import type { Report } from './checker';
import type { SoakMeta } from './history';

/** A table cell: no pipe or line break breaks the table. */
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

function countTable(title: string, head: string, counts: Record<string, number>): string[] {
  const rows = Object.entries(counts).sort(([a], [b]) => a.localeCompare(b));
  if (rows.length === 0) return [`**${title}:** none.`, ''];
  const total = rows.reduce((n, [, c]) => n + c, 0);
  return [`**${title}** (${total}):`, '', `| ${head} | count |`, '| --- | ---: |', ...rows.map(([k, c]) => `| ${cell(k)} | ${c} |`), ''];
}

/** The run's one-page summary (Markdown): what was injected and done, each promise held or violated, the verdict. */
export function renderSummary(meta: SoakMeta, report: Report): string {
  const promises = report.promises.map(
    (p) => `| ${p.name} | ${p.held ? 'held' : '**VIOLATED**'} | ${p.checked} | ${p.violations} | ${p.first ? cell(p.first) : ''} |`,
  );
  const { count, examples } = report.duplicates;
  const lines = [
    `# Soak: seed ${meta.seed}, ${meta.minutes} min, Redis ${meta.redis}`,
    '',
    `Started ${new Date(meta.startedAt).toISOString()}.`,
    '',
    ...countTable('Faults injected', 'kind', report.faults),
    ...countTable('Operations', 'operation', report.operations),
    '**Promises:**',
    '',
    '| promise | verdict | checked | violations | first counter-example |',
    '| --- | --- | ---: | ---: | --- |',
    ...promises,
    '',
    `**Duplicates** (received again after a 2xx answer; at least once allows them): ${count}${
      examples.length > 0 ? ` — e.g. ${examples.map((e) => `\`${e}\``).join(', ')}` : ''
    }.`,
    '',
    `${report.violations} violations`,
    '',
  ];
  return lines.join('\n');
}
