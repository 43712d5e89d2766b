/**
 * The per-process side of a shared fixed-window limit: what one API process
 * knows of one subject's current window, and whether it may admit a request
 * without writing to the store. Pure (no store, no clock): the limiter in
 * limiter.ts keeps one of these per subject and window and does the writes.
 *
 * A process admits a request locally while
 *   known + unconfirmed + 1 <= limit - margin   and   unconfirmed < cap
 * where `known` is the window's total as returned by this process's last
 * write and `unconfirmed` the requests it admitted locally that no returned
 * write has counted yet. Otherwise the request is written at once (the exact
 * path: admitted by its place in the returned total). Once `known` reaches
 * the limit, the window is spent and further requests are refused without a
 * write. Worst case over N processes: at most limit + N * cap requests are
 * admitted in one window (derivation in docs/api.md, "Limits").
 */

export interface LocalCounts {
  /** A write of this window returned (so `known` means something). */
  confirmed: boolean;
  /** The window's total in the store as of this process's last returned write. */
  known: number;
  /** Admitted locally, not yet sent to the store. */
  pending: number;
  /** Admitted locally, sent in the write now in flight. */
  inflight: number;
}

export interface LocalPolicy {
  limit: number;
  /** Most requests one process may have admitted locally and not yet seen counted; 0 counts every request with a write. */
  cap: number;
  /** Local admission stops this far below the limit. */
  margin: number;
}

type Decision = 'local' | 'write' | 'refuse';

export function newCounts(): LocalCounts {
  return { confirmed: false, known: 0, pending: 0, inflight: 0 };
}

/** How to handle the next request of a window; `storeOk` is false after a failed write until one succeeds. */
export function decide(c: LocalCounts, p: LocalPolicy, storeOk: boolean): Decision {
  if (p.cap <= 0) return 'write'; // exact mode: every request written, as before local counting
  if (!c.confirmed || !storeOk) return 'write';
  if (c.known >= p.limit) return 'refuse';
  const unconfirmed = c.pending + c.inflight;
  if (unconfirmed < p.cap && c.known + unconfirmed + 1 <= p.limit - p.margin) return 'local';
  return 'write';
}

/** Counts a locally admitted request; returns the budget left as this process sees it. */
export function admitLocally(c: LocalCounts, p: LocalPolicy): number {
  c.pending++;
  return Math.max(0, p.limit - (c.known + c.pending + c.inflight));
}

/** A write takes every pending local admission with it. */
export function startWrite(c: LocalCounts): number {
  const locals = c.pending;
  c.pending = 0;
  c.inflight = locals;
  return locals;
}

/** The write returned the window's total. */
export function writeSucceeded(c: LocalCounts, total: number): void {
  c.confirmed = true;
  c.known = Math.max(c.known, total);
  c.inflight = 0;
}

/** The write failed: its local admissions are still owed, and go with the next write. */
export function writeFailed(c: LocalCounts): void {
  c.pending += c.inflight;
  c.inflight = 0;
}

/** The per-process cap of local admissions for a limit: 5% of it (0 below 20, so small limits stay exact). */
export function localCap(limit: number): number {
  return Math.floor(limit / 20);
}
