import { createLogger, installProcessGuard, installShutdown, loadConfigOrExit } from '@fcd/service-kit';
import { UsageConfigSchema, usageConfigProblems } from './config';
import { startUsage } from './service';

const config = loadConfigOrExit('usage', UsageConfigSchema);
const problems = usageConfigProblems(config);
if (problems.length > 0) {
  process.stderr.write(`usage: invalid configuration: ${problems.join('; ')}\n`);
  process.exit(1);
}
const logger = createLogger({ service: 'usage', level: config.LOG_LEVEL });
installProcessGuard(logger);
try {
  const service = await startUsage(config, { logger });
  installShutdown(logger, [{ name: 'usage', run: () => service.stop() }]);
  logger.info({ port: service.httpPort, grpcPort: service.grpcPort, metricsPort: service.metricsPort }, 'ready');
} catch (err) {
  logger.fatal({ err }, 'usage service failed to start');
  process.exit(1);
}
