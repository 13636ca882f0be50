import { Writable } from 'node:stream';
import { createLogger, type Logger } from '@fcd/service-kit';

/**
 * A logger made by the services' own createLogger (its redaction included) whose JSON lines are
 * kept as written, one string each: to show what is, and is not, logged.
 */
export function logCapture(service = 'test', level = 'trace'): { lines: string[]; logger: Logger } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, logger: createLogger({ service, level, destination }) };
}
