/**
 * Counts what the hostile suite checked, prints it in the test output and
 * keeps test-artifacts/hostile.json current (the figures of docs/guarantees.md
 * come from it). One module instance per mocha run, shared by every file.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const ARTIFACT = join('test-artifacts', 'hostile.json');

type Section = 'fuzz' | 'cross_account' | 'credentials' | 'limits';

const counts: Record<Section, Record<string, number>> = { fuzz: {}, cross_account: {}, credentials: {}, limits: {} };

/** Adds `n` checked cases under `label` (an endpoint or a scenario) and prints the line. */
export function record(section: Section, label: string, n: number, quiet = false): void {
  counts[section][label] = (counts[section][label] ?? 0) + n;
  if (!quiet) console.log(`        ${section}: ${label}: ${n} cases`);
  flush();
}

export function total(section: Section): number {
  return Object.values(counts[section]).reduce((a, b) => a + b, 0);
}

function flush(): void {
  const totals = Object.fromEntries((Object.keys(counts) as Section[]).map((s) => [s, total(s)]));
  mkdirSync('test-artifacts', { recursive: true });
  writeFileSync(ARTIFACT, JSON.stringify({ generated_at: new Date().toISOString(), totals, ...counts }, null, 2) + '\n');
}

/** Runs `fn` counting calls of the returned `tick`; records the count even when `fn` fails. */
export async function counting<T>(section: Section, label: string, fn: (tick: () => void) => Promise<T>): Promise<T> {
  let n = 0;
  try {
    return await fn(() => {
      n += 1;
    });
  } finally {
    record(section, label, n);
  }
}
