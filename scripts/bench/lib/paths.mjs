import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const root = join(benchDir, '..', '..');
/** Logs, profiles and other scratch of the last run (ignored by git: bench/*.tmp). */
export const scratchDir = join(root, 'bench', 'run.tmp');
export const resultsFile = join(root, 'bench', 'results.json');
/** Where scripts/infra caches its downloads and builds (lib.sh: INFRA_CACHE). */
export const infraCache = process.env.EVENT_PLATFORM_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'event-platform');
/** Where scripts/infra keeps the running services' pid files and data (lib.sh: INFRA_RUN). */
export const infraRunDir = `${process.env.EVENT_PLATFORM_RUN ?? join(infraCache, 'run')}${process.env.INFRA_INSTANCE ? `-${process.env.INFRA_INSTANCE}` : ''}`;
