import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const root = join(benchDir, '..', '..');
/** Logs, profiles and other scratch of the last run (ignored by git: bench/*.tmp). */
export const scratchDir = join(root, 'bench', 'run.tmp');
export const resultsFile = join(root, 'bench', 'results.json');
