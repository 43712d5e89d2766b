/** Things to undo once the whole run ends: apps to close, topics and databases to drop. */
type Cleanup = () => Promise<void> | void;

const cleanups: Cleanup[] = [];
const STEP_LIMIT_MS = 30_000;

export function atRunEnd(fn: Cleanup): void {
  cleanups.push(fn);
}

/**
 * Runs every cleanup at once (apps close independently; one at a time took
 * minutes on a loaded machine), each bounded in time. Best effort: a step
 * that fails or hangs is reported, never fails the run.
 */
export async function runCleanups(): Promise<void> {
  const steps = cleanups.splice(0).reverse();
  await Promise.all(
    steps.map(async (fn) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          Promise.resolve().then(fn),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`still running after ${STEP_LIMIT_MS} ms`)), STEP_LIMIT_MS);
          }),
        ]);
      } catch (err) {
        console.warn('test cleanup step failed:', err instanceof Error ? err.message : err);
      } finally {
        clearTimeout(timer);
      }
    }),
  );
}
