import { randomUUID } from 'node:crypto';
import { type BaseConfig, type Env, loadBaseConfig, read } from '../../shared/src/config/index.js';

export interface DeliveryConfig extends BaseConfig {
  instanceId: string;
  groupId: string;
}

export function loadDeliveryConfig(env: Env): DeliveryConfig {
  const base = loadBaseConfig(env, 'event-delivery');
  return {
    ...base,
    instanceId: read.str(env, 'INSTANCE_ID', `delivery-${randomUUID().slice(0, 8)}`),
    groupId: read.str(env, 'DELIVERY_GROUP_ID', `${base.kafka.eventsTopic}.delivery`),
  };
}
