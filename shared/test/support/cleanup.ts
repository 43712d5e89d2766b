/** Things to undo once the whole run ends: apps to close, topics and databases to drop. */
type Cleanup = () => Promise<void> | void;

const cleanups: Cleanup[] = [];

export function atRunEnd(fn: Cleanup): void {
  cleanups.push(fn);
}

export async function runCleanups(): Promise<void> {
  for (const fn of cleanups.splice(0).reverse()) {
    try {
      await fn();
    } catch (err) {
      console.warn('test cleanup step failed:', err instanceof Error ? err.message : err);
    }
  }
}
