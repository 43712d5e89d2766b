import { ConfigError } from '../../shared/src/config/index.js';
import { loadApiConfig } from './config.js';
import { startApi } from './server.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadApiConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  const api = await startApi(config);
  let exiting = false;
  const shutdown = (signal: string): void => {
    if (exiting) return;
    exiting = true;
    api.deps.log.info({ signal }, 'shutting down');
    api
      .close()
      .then(() => process.exit(0))
      .catch(() => process.exit(1));
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  console.error('api failed to start:', err);
  process.exit(1);
});
