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
): Promise<ReadinessReport> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          check(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
          }),
        ]);
        return [name, { status: 'up' as const }] as const;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        return [name, { status: 'down' as const, error: message.replace(/\w+:\/\/\S+/g, '<url>').slice(0, 200) }] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  const result: ReadinessReport['checks'] = {};
  for (const [name, state] of entries) result[name] = state;
  return { ready: entries.every(([name, s]) => s.status === 'up' || optional.includes(name)), checks: result };
}
