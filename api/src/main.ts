import { runProcess } from '#shared/lifecycle.js';
import { loadApiConfig } from './config.js';
import { startApi } from './server.js';

runProcess(
  'api',
  () => loadApiConfig(process.env),
  async (config) => {
    const api = await startApi(config);
    return { log: api.deps.log, close: () => api.close() };
  },
  process.env,
);
