import type { Logger } from 'pino';
import { telemetryShutdownHook } from './trace-context';

export interface ShutdownStep {
  name: string;
  run: () => Promise<unknown> | unknown;
}

/**
 * Runs the steps in order. A step that throws is logged and the next one still runs: what is left
 * open is closed all the same.
 */
export async function runShutdownSteps(logger: Pick<Logger, 'error'>, steps: readonly ShutdownStep[]): Promise<void> {
  for (const step of steps) {
    try {
      await step.run();
    } catch (err) {
      logger.error({ err, step: step.name }, 'shutdown step failed');
    }
  }
}

/**
 * Installs SIGTERM/SIGINT handlers that run the steps in order, once:
 * not ready → stop accepting → drain → flush → close pools → flush telemetry.
 * A step that throws is logged and the next one still runs. The whole sequence
 * is bounded by timeoutMs, after which the process exits 1. When telemetry
 * was started in the process (--import dist/telemetry.js), flushing it is the last step.
 */
export function installShutdown(logger: Logger, steps: ShutdownStep[], timeoutMs = 25_000): () => Promise<void> {
  let running: Promise<void> | undefined;
  const shutdown = (signal = 'manual'): Promise<void> => {
    if (running) return running;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error({ timeoutMs }, 'shutdown timed out');
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    const flush = telemetryShutdownHook();
    const all = flush ? [...steps, { name: 'flush telemetry', run: flush }] : steps;
    running = (async () => {
      await runShutdownSteps(logger, all);
      clearTimeout(timer);
      logger.info('shutdown complete');
    })();
    return running;
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      void shutdown(signal).then(() => process.exit(0));
    });
  }
  return () => shutdown();
}
