import { createHash, timingSafeEqual } from 'node:crypto';
import { unauthorized } from '#shared/errors/index.js';
import { guard, type Guard } from '../../middleware/route.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * Producers authenticate with the configured INGEST_TOKEN, never a user
 * credential. The guard of the ingest route: it runs before body parsing, so an
 * unauthenticated caller cannot make the process parse a 16 MB batch. Hashing
 * first gives equal lengths for the constant-time compare.
 */
export function ingestGuard(token: string): Guard {
  const expected = digest(token);
  return guard('ingest_token', (ctx) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'));
    if (!match || !timingSafeEqual(digest(match[1] as string), expected)) {
      throw unauthorized('A valid ingest token is required');
    }
  });
}
