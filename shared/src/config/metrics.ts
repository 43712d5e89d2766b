import { ConfigError, type Env, optionalStr } from './env.js';

export interface MetricsConfig {
  /** When set, /metrics answers only `Authorization: Bearer <token>`; when null, it is open to whoever reaches the port. */
  token: string | null;
}

/** METRICS_TOKEN: optional in every environment (many deployments fence /metrics off by network instead). */
export function loadMetricsConfig(env: Env): MetricsConfig {
  const token = optionalStr(env, 'METRICS_TOKEN') ?? null;
  if (token !== null && (token.length < 16 || /\s/.test(token))) {
    throw new ConfigError('METRICS_TOKEN', 'must be at least 16 characters without spaces');
  }
  return { token };
}
