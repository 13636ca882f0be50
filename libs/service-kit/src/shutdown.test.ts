import { describe, expect, it } from 'vitest';
import { runShutdownSteps } from './shutdown';

describe('runShutdownSteps', () => {
  it('runs every step in order, logs a step that throws by name and goes on with the next', async () => {
    const ran: string[] = [];
    const logged: Array<{ step: string; message: string }> = [];
    const logger = {
      error: (fields: { err: Error; step: string }) => logged.push({ step: fields.step, message: fields.err.message }),
    };
    await runShutdownSteps(logger as never, [
      { name: 'not ready', run: () => ran.push('not ready') },
      {
        name: 'close pool',
        run: async () => {
          ran.push('close pool');
          throw new Error('already closed');
        },
      },
      { name: 'close metrics', run: async () => ran.push('close metrics') },
    ]);
    expect(ran).toEqual(['not ready', 'close pool', 'close metrics']);
    expect(logged).toEqual([{ step: 'close pool', message: 'already closed' }]);
  });
});
