import { ConfigError } from '../../shared/src/config/index.js';
import { loadDeliveryConfig } from './config.js';
import { startDelivery } from './worker.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadDeliveryConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  const worker = await startDelivery(config);
  let exiting = false;
  const shutdown = (signal: string): void => {
    if (exiting) return;
    exiting = true;
    worker.log.info({ signal }, 'shutting down');
    worker
      .close()
      .then(() => process.exit(0))
      .catch(() => process.exit(1));
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  console.error('delivery failed to start:', err);
  process.exit(1);
});
