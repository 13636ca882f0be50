import { createLogger, installProcessGuard, installShutdown, loadConfigOrExit } from '@fcd/service-kit';
import { FacilityConfigSchema } from './config';
import { startFacility } from './service';

const config = loadConfigOrExit('facility', FacilityConfigSchema);
const logger = createLogger({ service: 'facility', level: config.LOG_LEVEL });
installProcessGuard(logger);
try {
  const facility = await startFacility(config, { logger });
  installShutdown(logger, [{ name: 'facility', run: () => facility.stop() }]);
  logger.info({ port: facility.port, metricsPort: facility.metricsPort, relay: config.RELAY_ENABLED }, 'ready');
} catch (err) {
  logger.fatal({ err: { message: (err as Error).message } }, 'facility failed to start');
  process.exit(1);
}
