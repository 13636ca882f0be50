import { createLogger, installProcessGuard, installShutdown, loadConfigOrExit } from '@fcd/service-kit';
import { GatewayConfigSchema, gatewayConfigProblems } from './config';
import { startGateway } from './service';

const config = loadConfigOrExit('gateway', GatewayConfigSchema);
const problems = gatewayConfigProblems(config);
if (problems.length > 0) {
  process.stderr.write(`gateway: invalid configuration: ${problems.join('; ')}\n`);
  process.exit(1);
}
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
