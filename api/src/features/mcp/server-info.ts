import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | null = null;

/**
 * The service's version for `serverInfo`, from the root package.json. Found by
 * walking up because this file sits at a different depth in the source tree
 * and in the built image (dist/ beside package.json).
 */
export function serverVersion(): string {
  if (cached !== null) return cached;
  cached = '0.0.0';
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 8; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'event-platform' && typeof pkg.version === 'string') {
        cached = pkg.version;
        break;
      }
    } catch {
      // no package.json at this level: keep walking up
    }
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return cached;
}
