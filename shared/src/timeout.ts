/**
 * `work`, or `error()` once `ms` have passed without its answer. The work is
 * not stopped: callers use this where what they wait for is safe to let
 * finish on its own (a repeatable write, a close, a read whose answer is
 * dropped).
 */
export async function withTimeout<T>(work: Promise<T>, ms: number, error: () => Error = () => new Error(`timed out after ${ms} ms`)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(error()), Math.max(0, ms))))]);
  } finally {
    clearTimeout(timer);
  }
}
