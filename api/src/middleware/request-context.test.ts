import { expect } from 'chai';
import type { Context } from 'koa';
import { pino } from 'pino';
import { LOG_SAMPLE, requestContext } from './request-context.js';

/** A logger writing its lines into an array. */
function recordingLogger(level: string): { log: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

function fakeCtx(status: number): Context {
  const state: Record<string, unknown> = {};
  return {
    state,
    method: 'POST',
    path: '/internal/v1/events',
    get status() {
      return status;
    },
    get: () => '',
    set: () => undefined,
  } as unknown as Context;
}

async function run(mw: ReturnType<typeof requestContext>, status: number, sample?: number): Promise<void> {
  const ctx = fakeCtx(status);
  await mw(ctx, () => {
    if (sample !== undefined) ctx.state[LOG_SAMPLE] = sample;
    return Promise.resolve();
  });
}

describe('request log sampling', () => {
  it('logs 1 in N successful requests of a sampled route, every failure, and every other request', async () => {
    const { log, lines } = recordingLogger('info');
    const mw = requestContext(log);
    for (let i = 0; i < 250; i++) await run(mw, 202, 100);
    expect(lines.filter((l) => l.status === 202)).to.have.length(2);
    expect(lines.every((l) => l.sampled === 100)).to.equal(true);
    await run(mw, 503, 100);
    await run(mw, 200);
    expect(lines.filter((l) => l.status === 503)).to.have.length(1);
    expect(lines.filter((l) => l.status === 200 && l.sampled === undefined)).to.have.length(1);
  });

  it('logs every request at debug level', async () => {
    const { log, lines } = recordingLogger('debug');
    const mw = requestContext(log);
    for (let i = 0; i < 10; i++) await run(mw, 202, 100);
    expect(lines).to.have.length(10);
  });
});
