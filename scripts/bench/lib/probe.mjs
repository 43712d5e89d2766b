// Preloaded into every server process the bench starts (`node --import <this>`):
// answers the bench over the IPC channel with the process's memory, its event
// loop delay since the last reset, and, on request, a CPU profile of a window.
// It adds nothing to the request path: one histogram timer and an idle channel.
import { writeFileSync } from 'node:fs';
import { writeHeapSnapshot } from 'node:v8';
import { Session } from 'node:inspector/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';

if (process.send) {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let session = null;
  const ms = (ns) => Math.round((ns / 1e6) * 100) / 100;
  let cpuMark = process.cpuUsage();
  let timeMark = performance.now();
  // The delivery process's store operations (delivery/src/worker.ts publishes them while the
  // driver's command monitor is on), handshakes and pings left out.
  let storeOps = 0;
  subscribe('event-platform.delivery.store-op', (msg) => {
    if (!/^(hello|ismaster|ping|endSessions)$/i.test(msg?.command ?? '')) storeOps++;
  });
  // A live event's steps (api/src/live/live-trace.ts): ms since the event's data.t (its ingest request was sent).
  // Subscribed only when the bench asks (liveSteps), so the service publishes nothing otherwise.
  let steps = null;
  const onStep = (msg) => {
    let data = msg.data;
    if (data === undefined && msg.value) {
      try {
        data = JSON.parse(msg.value.toString('utf8')).data;
      } catch {
        return;
      }
    }
    const t = data?.t;
    if (typeof t !== 'number') return;
    (steps[msg.step] ??= []).push(msg.at - t);
    if (msg.kafkaTs) (steps['kafka.timestamp'] ??= []).push(msg.kafkaTs - t);
    // Within this process (one clock, no other process's scheduling): ms since the fan-out had the record.
    if (msg.step === 'fanout.batch') batchAt.set(t, msg.at);
    else if (batchAt.has(t)) (steps[`+${msg.step}`] ??= []).push(msg.at - batchAt.get(t));
  };
  const batchAt = new Map();

  const handlers = {
    stats({ reset }) {
      const mem = process.memoryUsage();
      const cpu = process.cpuUsage(cpuMark);
      const elapsed = performance.now() - timeMark;
      const out = {
        rss: mem.rss,
        heapUsed: mem.heapUsed,
        external: mem.external,
        eld: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max), mean: ms(delay.mean) },
        // share of one core used since the last reset
        cpu: elapsed > 0 ? (cpu.user + cpu.system) / 1000 / elapsed : 0,
        storeOps,
      };
      if (reset) {
        storeOps = 0;
        delay.reset();
        cpuMark = process.cpuUsage();
        timeMark = performance.now();
      }
      return out;
    },
    /** on: start (or restart) collecting live steps; returns what was collected since the last call, by step. */
    liveSteps({ on }) {
      const out = steps ?? {};
      if (on && !steps) subscribe('event-platform.live.step', onStep);
      if (!on && steps) unsubscribe('event-platform.live.step', onStep);
      steps = on ? {} : null;
      batchAt.clear();
      return out;
    },
    gc() {
      globalThis.gc?.();
      return { rss: process.memoryUsage().rss };
    },
    /** A heap snapshot (it collects garbage first, so it shows what is live); blocks the process for seconds. */
    heapSnapshot({ file }) {
      return { file: writeHeapSnapshot(file), rss: process.memoryUsage().rss };
    },
    async profileStart() {
      session = new Session();
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 500 });
      await session.post('Profiler.start');
      return {};
    },
    async profileStop({ file }) {
      if (!session) return {};
      const { profile } = await session.post('Profiler.stop');
      session.disconnect();
      session = null;
      writeFileSync(file, JSON.stringify(profile));
      return { file };
    },
  };

  process.on('message', (msg) => {
    const handler = msg && typeof msg === 'object' ? handlers[msg.probe] : undefined;
    if (!handler) return;
    Promise.resolve()
      .then(() => handler(msg))
      .then(
        (result) => process.send({ probeReply: msg.id, result }),
        (err) => process.send({ probeReply: msg.id, error: String(err) }),
      );
  });
  // The channel must not keep a process alive that is otherwise done.
  process.channel?.unref();
}
