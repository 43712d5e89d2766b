/**
 * Things to undo once a test file is done (apps and workers to close) or once
 * the whole run ends (a private Kafka + FerretDB to wipe; the run's topics and
 * databases are dropped by root-hooks.ts).
 *
 * A file's things are undone when its top-level `describe` ends (root-hooks.ts
 * adds that hook when the suite's first test starts), not at the run's end:
 * `npm test` runs some fifty files in one mocha process, and a delivery worker
 * or an API left running keeps polling and reloading from the shared store
 * until then (a delivery worker reads every subscription four times a second),
 * load the files after it pay for.
 */
type Cleanup = () => Promise<void> | void;

const fileCleanups: Cleanup[] = [];
const runCleanupSteps: Cleanup[] = [];
const STEP_LIMIT_MS = 30_000;

/** Undone when the current file's top-level describe ends (or at the run's end, whichever comes first). */
export function atFileEnd(fn: Cleanup): void {
  fileCleanups.push(fn);
}

/** Undone once the whole run ends (what several files share, such as a private Kafka + FerretDB). */
export function atRunEnd(fn: Cleanup): void {
  runCleanupSteps.push(fn);
}

/**
 * Runs steps at once (apps close independently; one at a time took minutes on
 * a loaded machine), each bounded in time. Best effort: a step that fails or
 * hangs is reported, never fails the run.
 */
async function runAll(steps: Cleanup[]): Promise<void> {
  await Promise.all(
    steps.reverse().map(async (fn) => {
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

/** The current file's steps (registered since the last file ended). */
export function runFileCleanups(): Promise<void> {
  return runAll(fileCleanups.splice(0));
}

/** Everything still registered: the last file's steps, then the run's. */
export async function runCleanups(): Promise<void> {
  await runFileCleanups();
  await runAll(runCleanupSteps.splice(0));
}
