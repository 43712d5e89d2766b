/**
 * Samples the resident set size of processes over time and judges the
 * growth: a least-squares slope over the second half of the run (the first
 * half is warm-up: JIT, pools, caches), so steady-state growth is what counts.
 */
import type { ServiceProcess } from './processes.js';

export interface Sample {
  t: number; // ms since the sampler started
  rss: number; // bytes
}

export class RssSampler {
  readonly samples = new Map<string, Sample[]>();
  private timer: NodeJS.Timeout | null = null;
  private readonly started = Date.now();

  constructor(
    private readonly processes: ServiceProcess[],
    private readonly everyMs = 2000,
  ) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.everyMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private sample(): void {
    for (const p of this.processes) {
      const rss = p.rss();
      if (rss === null) continue;
      const list = this.samples.get(p.name) ?? [];
      list.push({ t: Date.now() - this.started, rss });
      this.samples.set(p.name, list);
    }
  }
}

export interface Growth {
  samples: number;
  start_mb: number;
  end_mb: number;
  max_mb: number;
  /** Rise from the middle of the run to its end (MB), by the fitted line. */
  second_half_rise_mb: number;
  /** Least-squares slope over the second half, MB per minute. */
  second_half_slope_mb_per_min: number;
}

const MB = 1024 * 1024;

export function growth(samples: Sample[]): Growth {
  const half = samples.slice(Math.floor(samples.length / 2));
  const slope = leastSquaresSlope(half); // bytes per ms
  const span = half.length > 1 ? (half.at(-1) as Sample).t - (half[0] as Sample).t : 0;
  const round = (n: number): number => Math.round(n * 10) / 10;
  return {
    samples: samples.length,
    start_mb: round((samples[0]?.rss ?? 0) / MB),
    end_mb: round((samples.at(-1)?.rss ?? 0) / MB),
    max_mb: round(Math.max(...samples.map((s) => s.rss)) / MB),
    second_half_rise_mb: round((slope * span) / MB),
    second_half_slope_mb_per_min: round((slope * 60_000) / MB),
  };
}

function leastSquaresSlope(points: Sample[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const meanT = points.reduce((s, p) => s + p.t, 0) / n;
  const meanR = points.reduce((s, p) => s + p.rss, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - meanT) * (p.rss - meanR);
    den += (p.t - meanT) ** 2;
  }
  return den === 0 ? 0 : num / den;
}
