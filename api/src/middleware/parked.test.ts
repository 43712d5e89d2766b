import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import type { Context } from 'koa';
import { pino } from 'pino';
import { HeldReaders, parkedOf, type ParkedResponse } from '../live/held.js';
import { requestContext } from './request-context.js';

function recordingLogger(): { log: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

function fakeCtx(): Context {
  const res = Object.assign(new EventEmitter(), { destroyed: false });
  return { state: {}, method: 'POST', path: '/api/v1/events/wait', status: 404, respond: true, res, get: () => '', set: () => undefined } as unknown as Context;
}

const held = new HeldReaders({ deadlineResolutionMs: 25, maxLongPollsPerAccount: 1 });
const park = (ctx: Context): ParkedResponse => held.park(ctx);

describe('parked responses', () => {
  it('takes the response from Koa and reads 200 until it is written', () => {
    const ctx = fakeCtx();
    const parked = park(ctx);
    expect(ctx.respond).to.equal(false);
    expect(ctx.status).to.equal(200);
    expect(parkedOf(ctx)).to.equal(parked);
    expect(parkedOf(fakeCtx())).to.equal(undefined);
  });

  it('runs each hook once with the final status, and a hook added after done at once', () => {
    const parked = park(fakeCtx());
    const seen: number[] = [];
    parked.whenDone((s) => seen.push(s));
    parked.end(503);
    parked.end(200);
    parked.whenDone((s) => seen.push(s + 1));
    expect(seen).to.deep.equal([503, 504]);
  });

  it('logs a parked request when it is written, with that status and its whole duration, not when the chain returns', async () => {
    const { log, lines } = recordingLogger();
    const ctx = fakeCtx();
    let parked: ParkedResponse | undefined;
    await requestContext(log)(ctx, () => {
      parked = park(ctx);
      return Promise.resolve();
    });
    expect(lines).to.have.length(0);
    await new Promise((resolve) => setTimeout(resolve, 30));
    parked!.end(200);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include({ status: 200, path: '/api/v1/events/wait' });
    expect(lines[0]!.ms).to.be.at.least(25);
  });
});
