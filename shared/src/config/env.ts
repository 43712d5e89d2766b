/**
 * Small typed readers over an environment map. Each throws a ConfigError that
 * names the variable, so a bad deployment stops at boot with a clear message.
 */
export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`Invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

export function str(env: Env, name: string, fallback?: string): string {
  const value = env[name];
  if (value !== undefined && value !== '') return value;
  if (fallback !== undefined) return fallback;
  throw new ConfigError(name, 'is required');
}

export function optionalStr(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

export function int(env: Env, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

export function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

export function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

/**
 * A secret with a development default that is used only in development mode
 * (NODE_ENV=development, which `npm start` sets). Anywhere else a missing
 * secret stops the process with a message naming the variable.
 */
export function secret(env: Env, name: string, development: boolean, devDefault: string, minLength = 16): string {
  const value = optionalStr(env, name);
  if (value === undefined) {
    if (!development) throw new ConfigError(name, 'is required (only NODE_ENV=development, which `npm start` sets, falls back to a development default)');
    return devDefault;
  }
  if (value.length < minLength) throw new ConfigError(name, `must be at least ${minLength} characters`);
  return value;
}

/** Whether a listen address only takes connections from this machine. */
function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || /^::ffff:127(\.\d{1,3}){3}$/.test(h);
}

/**
 * A secret whose value is one of the public development defaults may serve a
 * development process on loopback only: refused in production and on any
 * other listen address, where anyone who has read the source holds the key.
 */
export function refuseDevDefault(name: string, isDevDefault: boolean, production: boolean, host: string | null): void {
  if (!isDevDefault) return;
  if (production) throw new ConfigError(name, 'is the public development default and is refused when NODE_ENV=production');
  if (host !== null && !isLoopbackHost(host)) {
    throw new ConfigError(name, `is the public development default and is refused with HOST=${host} (only a loopback HOST may use it); set a real secret`);
  }
}
