import { createLogger, installProcessGuard, installShutdown, loadConfigOrExit } from '@fcd/service-kit';
import { WebhookConfigSchema } from './config';
import { startWebhook } from './service';

const config = loadConfigOrExit('webhook', WebhookConfigSchema);
const logger = createLogger({ service: 'webhook', level: config.LOG_LEVEL });
installProcessGuard(logger);
try {
  const webhook = await startWebhook(config, { logger });
  installShutdown(logger, [{ name: 'webhook', run: () => webhook.stop() }]);
  logger.info({ port: webhook.port, metricsPort: webhook.metricsPort, secretKeyId: webhook.secretKeyId }, 'ready');
} catch (err) {
  logger.fatal({ err: { message: (err as Error).message } }, 'webhook service failed to start');
  process.exit(1);
}
