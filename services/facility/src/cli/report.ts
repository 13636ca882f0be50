import type { CliIo } from '@fcd/service-kit';
import { RECORD_KINDS } from '../domain/records';
import type { SyncSummary } from '../echo/sync';
import type { IngestReport } from '../store/ingestion';

/** An import or seed report: one JSON line with --json, else one line per kind, events and errors. */
export function printReport(io: CliIo, report: IngestReport, json: boolean, extra: Record<string, unknown> = {}): void {
  if (json) {
    io.stdout.write(`${JSON.stringify({ ...extra, ...report })}\n`);
    return;
  }
  for (const [k, v] of Object.entries(extra)) io.stdout.write(`${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}\n`);
  for (const kind of RECORD_KINDS) {
    const c = report.counts[kind];
    if (c.received === 0) continue;
    io.stdout.write(
      `${kind}: ${c.received} rows: ${c.inserted} inserted, ${c.updated} updated, ${c.unchanged} unchanged, ${c.rejected} rejected\n`,
    );
  }
  const evts = Object.entries(report.events).filter(([, n]) => n > 0);
  io.stdout.write(`events: ${evts.length === 0 ? 'none' : evts.map(([t, n]) => `${t} ${n}`).join(', ')}\n`);
  for (const e of report.errors) {
    const where = e.line !== undefined ? `line ${e.line}` : `row ${e.index}`;
    io.stdout.write(`error: ${where}: ${e.field}: ${e.message}\n`);
  }
  if (report.errors_truncated) io.stdout.write('error: (more errors not shown)\n');
}

/** A sync-echo summary: one JSON line with --json, else one line per file, ignored file and error. */
export function printSyncSummary(io: CliIo, s: SyncSummary, json: boolean): void {
  if (json) {
    io.stdout.write(`${JSON.stringify(s)}\n`);
    return;
  }
  const out: string[] = [];
  out.push(`source: ${s.source}${s.dry_run ? ' (dry run: nothing written)' : ''}`);
  if (s.initial_load) out.push(`first load into an empty database: events ${s.events_emitted ? 'emitted (--emit-events)' : 'not emitted'}`);
  for (const f of s.files) {
    if (f.error) out.push(`${f.origin}: refused: ${f.error}`);
    else
      out.push(
        `${f.origin}: ${f.read} read, ${f.inserted} inserted, ${f.changed} changed, ${f.unchanged} unchanged, ${f.rejected} rejected, ${f.missing} missing, ${f.events} events`,
      );
  }
  for (const i of s.ignored) out.push(`ignored: ${i}`);
  for (const e of s.errors) out.push(`error: ${e.origin}:${e.line}: ${e.reason}`);
  if (s.errors_truncated) out.push('error: (more errors not shown)');
  out.push(`seconds: ${s.seconds}`);
  io.stdout.write(`${out.join('\n')}\n`);
}
