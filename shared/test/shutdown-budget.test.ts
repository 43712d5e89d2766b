/**
 * Shutdown fits the orchestrator's grace period: each process bounds its
 * whole shutdown, and that bound is inside docker-compose.yml's
 * `stop_grace_period` for its service (else it is SIGKILLed part-way, e.g.
 * before the delivery recorder has flushed).
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { pino } from 'pino';
import { API_SHUTDOWN_MS } from '../../api/src/server.js';
import { DELIVERY_SHUTDOWN_MS } from '../../delivery/src/worker.js';
import { Lifecycle } from '../src/lifecycle.js';

/** Seconds of `stop_grace_period` of one service in docker-compose.yml (10 s, compose's default, if absent). */
function gracePeriodMs(service: string): number {
  const text = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');
  const block = new RegExp(`\\n  ${service}:\\n((?:    .*\\n|\\s*\\n)*)`).exec(text)?.[1];
  if (block === undefined) throw new Error(`no service ${service} in docker-compose.yml`);
  const m = /\n {4}stop_grace_period: (\d+)s/.exec('\n' + block);
  return (m ? Number(m[1]) : 10) * 1000;
}

/** Exiting after the last step (flushing logs, process.exit) takes a moment too. */
const EXIT_MARGIN_MS = 2000;

describe('shutdown fits the grace period', () => {
  it('bounds the API and the delivery process inside their stop_grace_period', () => {
    expect(API_SHUTDOWN_MS + EXIT_MARGIN_MS, 'api').to.be.at.most(gracePeriodMs('api'));
    expect(DELIVERY_SHUTDOWN_MS + EXIT_MARGIN_MS, 'delivery').to.be.at.most(gracePeriodMs('delivery'));
  });

  it('stops within the total budget when every step hangs, and still runs the last step', async () => {
    const lifecycle = new Lifecycle(pino({ level: 'silent' }));
    let lastRan = false;
    lifecycle.onStop('database', () => {
      lastRan = true;
    });
    for (let i = 0; i < 5; i++) lifecycle.onStop(`stuck-${i}`, () => new Promise<void>(() => undefined));
    const started = Date.now();
    await lifecycle.stop(10_000, 1000);
    // Five hung steps of 10 s each would take 50 s; the total budget holds them to ~1 s (+ a minimum per step).
    expect(Date.now() - started).to.be.below(5000);
    expect(lastRan).to.equal(true);
  });
});
