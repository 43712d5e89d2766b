import type { DnsConfig } from '../dns.js';
import { loadDnsConfig } from './dns.js';
import { ConfigError, type Env, bool, optionalStr, refuseDevDefault } from './env.js';

/** Webhook settings both processes read: the API checks and seals, the delivery process checks and signs. */
export interface WebhookConfig {
  /** 32-byte AES-256-GCM key sealing the signing secrets at rest. */
  secretKey: Buffer;
  /**
   * Development/test only: lets subscriptions target loopback and private
   * addresses (a receiver on this machine). Refused when NODE_ENV=production.
   */
  allowPrivateTargets: boolean;
  /** Ports allowed besides 443 and 8443 (inclusive ranges; WEBHOOK_ALLOWED_PORTS). */
  allowedPorts: [number, number][];
  /** How webhook host names are resolved (c-ares, cached, capped per account). */
  dns: DnsConfig;
}

/** `9443,10000-10100`: single ports and inclusive ranges. */
function parsePorts(env: Env): [number, number][] {
  const raw = optionalStr(env, 'WEBHOOK_ALLOWED_PORTS');
  if (raw === undefined) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(entry);
      const lo = Number(m?.[1]);
      const hi = m?.[2] === undefined ? lo : Number(m[2]);
      if (!m || lo < 1 || hi > 65535 || lo > hi) throw new ConfigError('WEBHOOK_ALLOWED_PORTS', `has a bad entry "${entry}" (want a port or a range like 10000-10100)`);
      return [lo, hi];
    });
}

// base64 of the 32 ASCII bytes "dev-only-webhook-key-change-me!!".
const DEV_SECRET_KEY = Buffer.from('dev-only-webhook-key-change-me!!').toString('base64');

/** Whether `key` is the public development key (the API refuses it off loopback). */
export function isDevWebhookKey(key: Buffer): boolean {
  return key.equals(Buffer.from(DEV_SECRET_KEY, 'base64'));
}

/**
 * `production` refuses the development settings. The development key is used
 * only when WEBHOOK_SECRET_KEY is unset and NODE_ENV=development is explicit
 * (read from `env`, so every caller gets the same rule).
 */
export function loadWebhookConfig(env: Env, production: boolean): WebhookConfig {
  const raw = optionalStr(env, 'WEBHOOK_SECRET_KEY');
  if (raw === undefined && env.NODE_ENV !== 'development') {
    throw new ConfigError('WEBHOOK_SECRET_KEY', 'is required (only NODE_ENV=development, which `npm start` sets, falls back to a development default); generate one with openssl rand -base64 32');
  }
  const encoded = raw ?? DEV_SECRET_KEY;
  const key = Buffer.from(encoded, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || key.length !== 32) {
    throw new ConfigError('WEBHOOK_SECRET_KEY', 'must be the base64 of exactly 32 bytes (openssl rand -base64 32)');
  }
  refuseDevDefault('WEBHOOK_SECRET_KEY', isDevWebhookKey(key), production, null);
  const allowPrivateTargets = bool(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', false);
  if (allowPrivateTargets && production) {
    throw new ConfigError('WEBHOOK_ALLOW_PRIVATE_TARGETS', 'is a development setting and is refused when NODE_ENV=production');
  }
  return { secretKey: key, allowPrivateTargets, allowedPorts: parsePorts(env), dns: loadDnsConfig(env) };
}
