import { createLogger, installProcessGuard, installShutdown, loadConfigOrExit } from '@fcd/service-kit';
import { GatewayConfigSchema } from './config';
import { startGateway } from './service';

const config = loadConfigOrExit('gateway', GatewayConfigSchema);
const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
installProcessGuard(logger);
try {
  const gateway = await startGateway(config, { logger });
  installShutdown(logger, [{ name: 'gateway', run: () => gateway.stop() }]);
  logger.info({ port: gateway.port, metricsPort: gateway.metricsPort }, 'ready');
} catch (err) {
  logger.fatal({ err }, 'gateway failed to start');
  process.exit(1);
}
