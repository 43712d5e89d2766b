import { Writable } from 'node:stream';
import { expect } from 'chai';
import { logLevel } from 'kafkajs';
import { pino } from 'pino';
import { kafkaLogSink } from './kafka.js';

describe("kafkajs's log", () => {
  function capture(): { lines: Record<string, unknown>[]; sink: ReturnType<typeof kafkaLogSink> } {
    const lines: Record<string, unknown>[] = [];
    const out = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    return { lines, sink: kafkaLogSink(pino({ level: 'debug' }, out)) };
  }
  const entry = (level: number, message: string) => ({ namespace: 'Producer', level, label: 'WARN', log: { message, timestamp: 'now', logger: 'kafkajs' } });

  it('explains the idempotent-producer retries warning once, at info, then keeps it at debug', () => {
    const { lines, sink } = capture();
    const warning = 'Limiting retries for the idempotent producer may invalidate EoS guarantees';
    sink(entry(logLevel.WARN, warning));
    sink(entry(logLevel.WARN, warning));
    expect(lines.map((l) => [l.level, l.msg])).to.deep.equal([
      [30, warning],
      [20, warning],
    ]);
    expect(lines[0]!.why).to.match(/bounded on purpose/);
  });

  it('passes every other entry through at its own level', () => {
    const { lines, sink } = capture();
    sink(entry(logLevel.WARN, 'Connection timeout'));
    sink(entry(logLevel.ERROR, 'Crash'));
    expect(lines.map((l) => [l.level, l.msg, l.why])).to.deep.equal([
      [40, 'Connection timeout', undefined],
      [50, 'Crash', undefined],
    ]);
  });
});
