export function median(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** Nearest-rank percentile of unsorted samples. */
export function percentile(values, p) {
  if (values.length === 0) return null;
  const v = Float64Array.from(values).sort();
  const rank = Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1));
  return v[rank];
}

export function round(x, digits = 1) {
  if (x === null || x === undefined || !Number.isFinite(x)) return null;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The median of several runs' values with what spreads them: min, max and the largest distance from the median as a share of it. */
export function spreadOf(values) {
  const v = values.filter((x) => Number.isFinite(x));
  const m = median(v);
  if (m === null) return { median: null, spread: { values, min: null, max: null, maxDeviation: null } };
  const maxDeviation = m === 0 ? null : Math.max(...v.map((x) => Math.abs(x - m))) / Math.abs(m);
  return { median: m, spread: { values, min: Math.min(...v), max: Math.max(...v), maxDeviation } };
}
