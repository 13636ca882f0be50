import { type CliIo, CliUsageError, EXIT_OK, migrate, stopSignal, systemClock } from '@fcd/service-kit';
import { runSimulation } from '../demo/simulate';
import { SCHEMA } from '../store/db';
import { migrations } from '../store/migrations';
import type { Args } from './args';
import { ingestionFor, openContext, retryForMs, retrying } from './context';

/** `simulate --rate R[/s]`: keeps producing changes until --duration ends or the process is stopped. */
export async function cmdSimulate(args: Args, io: CliIo): Promise<number> {
  const rateText = args.flag('rate');
  const rate = Number(rateText?.replace(/\/s$/, ''));
  if (!rateText || !Number.isFinite(rate) || rate <= 0 || rate > 10_000)
    throw new CliUsageError('--rate must be a number of changes per second, e.g. 2/s');
  const durationText = args.flag('duration');
  const duration = durationText === undefined ? undefined : Number(durationText);
  if (duration !== undefined && (!Number.isFinite(duration) || duration <= 0))
    throw new CliUsageError('--duration must be a number of seconds');
  const seed = args.flag('seed');
  const retryFor = retryForMs(args, io);
  const { pool, logger } = openContext(io);
  const retry = retrying(retryFor, logger);
  const signal = stopSignal(io);
  try {
    await retry(() => migrate(pool, SCHEMA, migrations));
    const summary = await runSimulation({
      pool,
      retry,
      ingestion: ingestionFor(pool),
      clock: systemClock,
      logger,
      rate,
      signal,
      ...(duration !== undefined ? { durationMs: duration * 1000 } : {}),
      ...(seed !== undefined ? { seed } : {}),
    });
    io.stdout.write(`${JSON.stringify(summary)}\n`);
    return EXIT_OK;
  } finally {
    await pool.end();
  }
}
