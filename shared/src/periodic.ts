/**
 * Runs `task` every `intervalMs` (the first run after one interval) on a timer
 * that does not keep the process alive. `jitter` (a fraction, 0.2 = up to 20 %)
 * lengthens the interval by a random amount drawn once, so processes started
 * together do not all sweep at the same moment. Returns the stop function.
 * The sweepers of what TTL indexes would remove on MongoDB (FerretDB has none)
 * run on this.
 */
export function runPeriodically(intervalMs: number, task: () => void, jitter = 0): () => void {
  const timer = setInterval(task, intervalMs + Math.floor(Math.random() * intervalMs * jitter));
  timer.unref();
  return () => clearInterval(timer);
}
