import { type Clock, type Logger, type Pool, utcDay } from '@fcd/service-kit';
import type { Ingestion, IngestReport, RawRow } from '../store/ingestion';
import { createRng } from './prng';
import { chooseAction, planCaseProgress, planNewCase, planResolution, planViolation, type SimChange } from './simulation';
import { listRegistryIds, loadFacilityRecord, randomOpenCase } from './simulation-store';

export interface SimulationSettings {
  pool: Pool;
  ingestion: Ingestion;
  clock: Clock;
  logger: Logger;
  /** Changes per second. */
  rate: number;
  /** Stop after this long (ms); run until stopped when absent. */
  durationMs?: number;
  /** Stop after this many changes. */
  maxSteps?: number;
  seed?: string | number;
  signal?: AbortSignal;
  sleep?: (ms: number) => Promise<void>;
  /** Runs each database step (again, while Postgres is unreachable); default once. */
  retry?: <T>(fn: () => Promise<T>) => Promise<T>;
}

export interface SimulationSummary {
  steps: number;
  actions: Record<SimChange['action'], number>;
  events: IngestReport['events'];
}

const rows = (items: object[]): RawRow[] => items.map((raw, index) => ({ ref: { index }, raw: { ...raw } as Record<string, unknown> }));

/**
 * Keeps producing changes at `rate` per second through the normal ingestion
 * path, so each one writes its events to the outbox and the relay publishes
 * them (a new user sees webhooks fire). Needs facilities (run `seed` first).
 */
export async function runSimulation(s: SimulationSettings): Promise<SimulationSummary> {
  const sleep = s.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const retry = s.retry ?? (<T>(fn: () => Promise<T>) => fn());
  const registryIds = await retry(() => listRegistryIds(s.pool));
  if (registryIds.length === 0) throw new Error('no facilities to simulate on; run `seed` or `import` first');
  const rng = createRng(s.seed ?? s.clock.now());
  const summary: SimulationSummary = {
    steps: 0,
    actions: { violation: 0, case: 0, progress: 0, resolve: 0 },
    events: { 'violation.new': 0, 'case.new': 0, 'case.updated': 0, 'facility.status_changed': 0 },
  };
  const started = s.clock.now();
  const runTag = started.toString(36).toUpperCase();
  const intervalMs = 1000 / s.rate;

  while (!s.signal?.aborted) {
    if (s.maxSteps !== undefined && summary.steps >= s.maxSteps) break;
    const elapsed = s.clock.now() - started;
    if (s.durationMs !== undefined && elapsed >= s.durationMs) break;
    const dueAt = summary.steps * intervalMs;
    if (dueAt > elapsed) {
      await sleep(dueAt - elapsed);
      continue;
    }
    const tag = `${runTag}-${summary.steps + 1}`;
    // One step, retried whole: planned again from the database, ingested idempotently (natural keys).
    const step = await retry(async () => {
      const change = await nextChange(s, rng, registryIds, tag);
      if (!change) return undefined;
      const report = await s.ingestion.ingestAll({
        facilities: rows(change.facilities),
        violations: rows(change.violations),
        cases: rows(change.cases),
      });
      return { change, report };
    });
    summary.steps++;
    if (!step) continue;
    const { change, report } = step;
    summary.actions[change.action]++;
    for (const [type, n] of Object.entries(report.events)) summary.events[type as keyof SimulationSummary['events']] += n;
    s.logger.debug({ action: change.action, events: report.events }, 'simulated change');
  }
  return summary;
}

async function nextChange(
  s: SimulationSettings,
  rng: ReturnType<typeof createRng>,
  registryIds: string[],
  tag: string,
): Promise<SimChange | undefined> {
  const today = utcDay(s.clock.now());
  const action = chooseAction(rng);
  if (action === 'progress') {
    const c = await randomOpenCase(s.pool);
    if (c) return planCaseProgress(rng, c, today);
  }
  const facility = await loadFacilityRecord(s.pool, rng.pick(registryIds));
  if (!facility) return undefined;
  if (action === 'resolve') {
    const resolved = planResolution(facility, today);
    if (resolved) return resolved;
  }
  if (action === 'case') return planNewCase(rng, facility, tag, today);
  return planViolation(rng, facility, `SIM-${tag}`, today);
}
