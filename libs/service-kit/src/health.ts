import { realTimer, type Timer, waitAtMost } from './wakeable-sleep';

export type CheckState = 'up' | 'down';

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, { status: CheckState; error?: string }>;
}

export type Check = () => Promise<unknown>;

/**
 * Runs every dependency check in parallel, each bounded by a timeout, and
 * names each dependency's state. Errors are reduced to a short message (never a
 * connection string).
 */
export async function checkReadiness(
  checks: Record<string, Check>,
  timeoutMs = 1000,
  /** Checks reported but not required for readiness (a documented degradation, e.g. fail-open). */
  optional: readonly string[] = [],
  /** Injected so tests need not wait out the timeout. */
  timer: Timer = realTimer,
): Promise<ReadinessReport> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      try {
        if (!(await waitAtMost(check(), timeoutMs, timer))) throw new Error(`timed out after ${timeoutMs} ms`);
        return [name, { status: 'up' as const }] as const;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        return [name, { status: 'down' as const, error: message.replace(/\w+:\/\/\S+/g, '<url>').slice(0, 200) }] as const;
      }
    }),
  );
  const result: ReadinessReport['checks'] = {};
  for (const [name, state] of entries) result[name] = state;
  return { ready: entries.every(([name, s]) => s.status === 'up' || optional.includes(name)), checks: result };
}
