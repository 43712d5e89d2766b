// The result table: each figure, its same-run reference, the ratio, the target.
import { round } from './stats.mjs';

function describeTarget(t) {
  if (!t) return '';
  if (t.ratioAtLeast !== undefined) return `ratio >= ${t.ratioAtLeast}`;
  if (t.valueAtMost !== undefined) return `< ${t.valueAtMost} ${t.unit ?? ''}`.trim();
  if (t.valueAtLeast !== undefined) return `>= ${t.valueAtLeast} ${t.unit ?? ''}`.trim();
  return '';
}

/** Decimals that keep a figure readable: none from 100 up, one from 1, three below (0.012 pages/s). */
function places(v) {
  const a = Math.abs(v ?? 0);
  return a >= 100 ? 0 : a >= 1 || a === 0 ? 1 : 3;
}

/** Rounds a row's numbers and decides whether its target is met. */
export function judge(row) {
  const t = row.target;
  let met = null;
  if (t && row.value !== null && Number.isFinite(row.value)) {
    if (t.ratioAtLeast !== undefined) met = Number.isFinite(row.ratio) ? row.ratio >= t.ratioAtLeast : null;
    else if (t.valueAtMost !== undefined) met = row.value < t.valueAtMost;
    else if (t.valueAtLeast !== undefined) met = row.value >= t.valueAtLeast;
  }
  const digits = places(row.value);
  const spread = row.spread ? { ...row.spread, min: round(row.spread.min, digits), max: round(row.spread.max, digits), maxDeviation: round(row.spread.maxDeviation, 3) } : undefined;
  return {
    ...row,
    ...(spread ? { spread } : {}),
    value: round(row.value, digits),
    reference: row.reference ? { ...row.reference, value: round(row.reference.value, places(row.reference.value)) } : null,
    ratio: round(row.ratio, Math.abs(row.ratio ?? 0) >= 0.01 || row.ratio === 0 ? 2 : 4),
    target: t ? { ...t, text: describeTarget(t) } : null,
    met,
  };
}

const fmt = (v) => (v === null || v === undefined ? '—' : typeof v === 'number' ? v.toLocaleString('en-US') : String(v));

/** "3 runs: 520–610 (±9 %)": the runs behind a median and their largest distance from it. */
function describeSpread(s) {
  if (!s) return '—';
  const dev = s.maxDeviation === null ? '' : ` (±${Math.round(s.maxDeviation * 100)} %)`;
  return `${s.values.length} run${s.values.length === 1 ? '' : 's'}: ${fmt(s.min)}–${fmt(s.max)}${dev}`;
}

export function tableLines(rows) {
  // The spread column appears once any figure carries the runs behind its median.
  const spread = rows.some((r) => r.spread);
  const header = ['Figure', 'Value', ...(spread ? ['Spread'] : []), 'Reference (same run)', 'Ratio', 'Target', 'Met'];
  const body = rows.map((r) => [
    r.label,
    `${fmt(r.value)} ${r.unit}`,
    ...(spread ? [describeSpread(r.spread)] : []),
    r.reference ? `${r.reference.label}: ${fmt(r.reference.value)} ${r.reference.unit}` : '—',
    fmt(r.ratio),
    r.target?.text || '—',
    r.met === null ? '—' : r.met ? 'yes' : 'NO',
  ]);
  return [header, ...body];
}

export function printTable(rows, report) {
  const lines = tableLines(rows);
  const widths = lines[0].map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  const m = report.machine;
  console.log(`\n${m.cpus} x ${m.cpuModel}, ${m.memoryGb} GB; Node ${m.node}; ${m.kafka}; ${m.mongo}; load average ${m.loadAverageAtStart.join(' ')} -> ${m.loadAverageAtEnd.join(' ')}`);
  console.log(`${report.runs_per_figure} run(s) per figure (median), ${report.seconds} s in all\n`);
  for (const [i, l] of lines.entries()) {
    console.log('| ' + l.map((c, j) => c.padEnd(widths[j])).join(' | ') + ' |');
    if (i === 0) console.log('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
  }
  for (const [name, s] of Object.entries(report.scenarios)) if (s.error) console.log(`\n${name} FAILED: ${s.error}`);
}
