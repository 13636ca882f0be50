/**
 * Polls fn until ok(value) holds, for conditions reached by another process
 * (a flush, a reconnect). Not a timer-based assertion: the bound only stops a
 * broken run from hanging. Throws with the last value when the bound passes.
 */
export async function eventually<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`condition not reached within ${timeoutMs} ms; last value: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
