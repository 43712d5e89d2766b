/** Prometheus view of the tail window (read at scrape time; docs/operations.md lists the series). */
import { Counter, Gauge, type Registry } from '#shared/metrics.js';
import type { TailWindow } from './tail-window.js';

export function registerTailMetrics(registry: Registry, tail: TailWindow): void {
  const registers = [registry];
  const perPartition = (name: string, help: string, pick: (s: ReturnType<TailWindow['stats']>[number]) => bigint | number): void => {
    new Gauge({
      name,
      help,
      labelNames: ['partition'],
      registers,
      collect() {
        for (const s of tail.stats()) this.set({ partition: String(s.partition) }, Number(pick(s)));
      },
    });
  };
  perPartition('tail_window_events', 'Events held in this process\'s tail window, per partition', (s) => s.events);
  perPartition('tail_window_bytes', 'Heap charged to the tail window (twice each event\'s size on the topic + 160), per partition', (s) => s.bytes);
  perPartition('tail_window_span_offsets', 'Offsets the tail window covers (head minus start), per partition', (s) => s.next - s.start);
  let reported = { hit: 0, miss: 0 };
  new Counter({
    name: 'tail_window_reads_total',
    help: 'Reads with a cursor that asked the tail window: `hit` answered from memory, `miss` went to MongoDB',
    labelNames: ['result'],
    registers,
    collect() {
      this.inc({ result: 'hit' }, tail.hits - reported.hit);
      this.inc({ result: 'miss' }, tail.misses - reported.miss);
      reported = { hit: tail.hits, miss: tail.misses };
    },
  });
}
