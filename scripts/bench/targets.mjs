// The targets of docs/benchmarks.md ("Current figures") beside what this `npm run bench` run
// measured: the closing table of run.mjs, read from the results the rounds wrote to bench-results/
// (docs/benchmarks.md has the method of each figure). Only rounds that wrote their result during this run are shown.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';

/** The newest bench-results/<name>-<date>.json written at or after `since` (epoch ms), parsed; undefined when none. */
function latest(dir, name, since) {
  let files;
  try {
    files = readdirSync(dir).filter((f) => f.startsWith(`${name}-`) && f.endsWith('.json'));
  } catch {
    return undefined;
  }
  const fresh = files
    .map((f) => ({ file: resolve(dir, f), at: statSync(resolve(dir, f)).mtimeMs }))
    .filter((f) => f.at >= since)
    .sort((a, b) => b.at - a.at);
  return fresh[0] ? JSON.parse(readFileSync(fresh[0].file, 'utf8')) : undefined;
}

/**
 * One row per target whose round ran: the figure, the target and whether it was met. The dispatcher's
 * halving target is 485 µs per delivery: half of the first figures measured for it (954–970 µs on
 * 2026-11-27, docs/benchmarks/history/2026-11-27.md, "02:47–03:03"), the looser half.
 */
export function targetRows(dir, since) {
  const rows = [];
  const row = (target, figure, met) => rows.push({ target, figure, met: met ? 'met' : 'NOT met' });
  const usage = latest(dir, 'usage', since);
  if (usage) {
    const e = usage.efficiency;
    row(
      'usage path: gateway CPU µs/request ≤ 50',
      `${e.gatewayCpuUsPerRequest} (bare server ${e.bareCpuUsPerRequest})`,
      e.gatewayCpuUsPerRequest <= 50,
    );
    row('usage path: usage CPU µs/request ≤ 20', `${e.usageCpuUsPerRequest}`, e.usageCpuUsPerRequest <= 20);
  }
  const proxied = latest(dir, 'proxied', since);
  if (proxied) row(`proxied: gateway / minimal proxy ≥ ${proxied.target}`, `${proxied.ratio}`, proxied.ratio >= proxied.target);
  const read = latest(dir, 'read', since);
  if (read) {
    const { detail, target } = read;
    row(`read path, detail: service / bare Fastify + pg ≥ ${target.ratio}`, `${detail.ratio}`, detail.ratio >= target.ratio);
    row(
      `read path, detail: CPU per request, service / bare ≤ ${target.cpu}`,
      `× ${detail.cpuRatio} (service ${detail.cpuUsPerRequest.service}, bare ${detail.cpuUsPerRequest.bare} µs)`,
      detail.cpuRatio <= target.cpu,
    );
  }
  const delivery = latest(dir, 'delivery', since);
  if (delivery) {
    const d = delivery.dispatcher;
    row('backlog: deliveries/s ≥ 2,500', `${d.deliveries_per_s}`, d.deliveries_per_s >= 2500);
    row('backlog: ratio to bare undici ≥ 0.35', `${delivery.ratio}`, delivery.ratio >= 0.35);
    row('backlog: dispatcher CPU µs/delivery ≤ 485', `${d.cpu_us_per_delivery}`, d.cpu_us_per_delivery <= 485);
  }
  const filters = latest(dir, 'filters', since);
  if (filters) {
    row('filters: fan-out events/s, filtered / unfiltered ≥ 0.95', `${filters.ratio.fan_out}`, filters.ratio.fan_out >= 0.95);
    row('filters: live deliveries/s, filtered / unfiltered ≥ 0.95', `${filters.ratio.delivery}`, filters.ratio.delivery >= 0.95);
  }
  const paced = latest(dir, 'paced', since);
  // The runs with a target of their own: the paced rate's (900/s) and the other writer's (events
  // written by another process); not the 80 % run's or the poll-only baseline.
  for (const run of paced?.runs ?? []) {
    const target = run.target;
    if (!target) continue;
    const { p99, max } = run.latency.total;
    const all = run.missing === 0;
    row(`paced ${run.label}: p99 < ${target.p99} ms`, `${p99}${all ? '' : ` (${run.missing} missing)`}`, all && p99 < target.p99);
    row(`paced ${run.label}: max < ${target.max} ms`, `${max}`, all && max < target.max);
  }
  return rows;
}
