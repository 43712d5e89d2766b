import { runProcess } from '#shared/lifecycle.js';
import { loadDeliveryConfig } from './config.js';
import { startDelivery } from './worker.js';

runProcess('delivery', () => loadDeliveryConfig(process.env), startDelivery, process.env);
