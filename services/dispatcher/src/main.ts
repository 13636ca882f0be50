import { createLogger, installProcessGuard, installShutdown, loadConfigOrExit } from '@fcd/service-kit';
import { DispatcherConfigSchema } from './config';
import { DispatcherConfigError, MigrationError, startDispatcher } from './service';

const config = loadConfigOrExit('dispatcher', DispatcherConfigSchema);
const logger = createLogger({ service: 'dispatcher', level: config.LOG_LEVEL });
installProcessGuard(logger);
try {
  const dispatcher = await startDispatcher(config, { logger });
  installShutdown(logger, [{ name: 'dispatcher', run: () => dispatcher.stop() }]);
  const { port, metricsPort } = dispatcher;
  logger.info({ port, metricsPort, consumer: config.DISPATCHER_CONSUMER, stream: config.EVENTS_STREAM }, 'ready');
} catch (err) {
  // Anything else is unexpected: the process guard logs it and exits 70.
  if (!(err instanceof DispatcherConfigError || err instanceof MigrationError)) throw err;
  if (err instanceof DispatcherConfigError) process.stderr.write(`dispatcher: invalid configuration: ${err.message}\n`);
  process.exit(1);
}
