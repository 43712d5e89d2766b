import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Next } from 'koa';
import { unauthorized } from '../../../../shared/src/errors/index.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * Producers authenticate with the configured INGEST_TOKEN, never a user
 * credential. Mounted before body parsing, so an unauthenticated caller cannot
 * make the process parse a 16 MB batch. Hashing first gives equal lengths for
 * the constant-time compare.
 */
export function ingestAuth(opts: { token: string; prefix: string }) {
  const expected = digest(opts.token);
  return async function requireIngestToken(ctx: Context, next: Next): Promise<void> {
    if (!ctx.path.startsWith(opts.prefix)) return next();
    const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'));
    if (!match || !timingSafeEqual(digest(match[1] as string), expected)) {
      throw unauthorized('A valid ingest token is required');
    }
    return next();
  };
}
