import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { targetRows } from './targets.mjs';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A results directory with `files` (name → result), each written at `at` (epoch ms). */
function resultsDir(files: Record<string, unknown>, at: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'bench-targets-'));
  dirs.push(dir);
  for (const [name, result] of Object.entries(files)) {
    const file = join(dir, name);
    writeFileSync(file, JSON.stringify(result));
    utimesSync(file, at / 1000, at / 1000);
  }
  return dir;
}

const pacedRun = (label: string, p99: number, max: number, missing = 0, target?: { p99: number; max: number } | null) => ({
  label,
  latency: { total: { p50: 10, p99, max } },
  missing,
  ...(target === undefined ? {} : { target }),
});

describe('the closing table of npm run bench', () => {
  it("shows the read path's detail targets: the ratio and the CPU per request", () => {
    const read = {
      target: { ratio: 0.8, cpu: 1.25 },
      detail: { ratio: 0.841, cpuRatio: 1.27, cpuUsPerRequest: { service: 152, bare: 120 } },
      list: { ratio: 0.9, cpuRatio: 1.0, cpuUsPerRequest: { service: 300, bare: 300 } },
    };
    const now = Date.now();
    expect(targetRows(resultsDir({ 'read-2026-11-29.json': read }, now), now - 1000)).toEqual([
      { target: 'read path, detail: service / bare Fastify + pg ≥ 0.8', figure: '0.841', met: 'met' },
      { target: 'read path, detail: CPU per request, service / bare ≤ 1.25', figure: '× 1.27 (service 152, bare 120 µs)', met: 'NOT met' },
    ]);
  });

  it("shows the paced runs with a target of their own: 900/s and the other writer's, not the others", () => {
    const paced = {
      target_ms: { p99: 100, max: 500 },
      runs: [
        pacedRun('900/s', 51, 107, 0, { p99: 100, max: 500 }),
        pacedRun('80 % of 1554/s = 1242/s', 85, 140),
        pacedRun('900/s, other writer, LISTEN', 61, 121, 0, { p99: 60, max: 500 }),
        pacedRun('900/s, other writer, poll only', 264, 400, 0, null),
      ],
    };
    const now = Date.now();
    expect(targetRows(resultsDir({ 'paced-2026-11-29.json': paced }, now), now - 1000)).toEqual([
      { target: 'paced 900/s: p99 < 100 ms', figure: '51', met: 'met' },
      { target: 'paced 900/s: max < 500 ms', figure: '107', met: 'met' },
      { target: 'paced 900/s, other writer, LISTEN: p99 < 60 ms', figure: '61', met: 'NOT met' },
      { target: 'paced 900/s, other writer, LISTEN: max < 500 ms', figure: '121', met: 'met' },
    ]);
  });

  it('counts a run with deliveries missing as not met, and leaves out results written before the run', () => {
    const paced = { target_ms: { p99: 100, max: 500 }, runs: [pacedRun('900/s', 40, 90, 3, { p99: 100, max: 500 })] };
    const now = Date.now();
    const dir = resultsDir({ 'paced-2026-11-29.json': paced, 'read-2026-11-28.json': { target: {}, detail: {} } }, now);
    utimesSync(join(dir, 'read-2026-11-28.json'), (now - 60_000) / 1000, (now - 60_000) / 1000);
    expect(targetRows(dir, now - 1000)).toEqual([
      { target: 'paced 900/s: p99 < 100 ms', figure: '40 (3 missing)', met: 'NOT met' },
      { target: 'paced 900/s: max < 500 ms', figure: '90', met: 'NOT met' },
    ]);
  });
});
