import type { Logger } from 'pino';

/** Exit code of a process stopped by the guard (EX_SOFTWARE: an internal error). */
export const UNEXPECTED_ERROR_EXIT_CODE = 70;

/** Strips credentials from URLs in a message (`scheme://user:secret@host` → `scheme://***@host`). */
export function redactUrls(message: string): string {
  return message.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/\s@]+@/gi, '$1***@');
}

/**
 * The last line of defence: an error nothing handled (an uncaught exception,
 * an unhandled rejection, an 'error' event without a listener) is logged as
 * one fatal line — its name and message with URL credentials removed, never
 * the error object, which may carry connection settings — and the process
 * exits with code 70 so the orchestrator restarts it. The state after such an
 * error is unknown, so carrying on would be worse.
 */
export function installProcessGuard(logger: Logger, exit: (code: number) => void = (c) => process.exit(c)): void {
  const onError = (origin: 'uncaughtException' | 'unhandledRejection') => (err: unknown) => {
    const e = err instanceof Error ? err : new Error(String(err));
    try {
      logger.fatal({ origin, err: { name: e.name, message: redactUrls(e.message) } }, 'unexpected error; exiting');
    } finally {
      exit(UNEXPECTED_ERROR_EXIT_CODE);
    }
  };
  process.on('uncaughtException', onError('uncaughtException'));
  process.on('unhandledRejection', onError('unhandledRejection'));
}
