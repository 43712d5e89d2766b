/**
 * At-least-once across a crash: the delivery process runs as a real child
 * process (node delivery/src/main.ts), is SIGKILLed while attempts are in
 * flight and events keep arriving, then started again. Every event must
 * reach every matching subscription at least once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { hang, Receiver, type Behaviour } from '#test-support/receiver.js';
import { uniqueName } from '#test-support/env.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { deliveryTestEnv, envelope, newAccountId, TestDb, TestLog, waitForGroup } from './support/delivery.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function startChild(env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'delivery/src/main.ts'], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr?.on('data', (d: Buffer) => {
    if (process.env.TEST_LOG_LEVEL) process.stderr.write(d);
  });
  atFileEnd(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return child;
}

function killed(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

describe('delivery process crash', function () {
  this.timeout(120_000);
  let receiver: Receiver;

  before(async () => {
    receiver = await Receiver.start();
  });
  after(() => receiver.close());

  it('delivers every event at least once after being killed mid-flight and restarted', async () => {
    const env = deliveryTestEnv(receiver.caFile, {
      EVENTS_TOPIC: `${deliveryTestEnv('x').EVENTS_TOPIC}-crash`,
      MONGO_DB: `${deliveryTestEnv('x').MONGO_DB}_crash`,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      // Short leases: the killed process's claimed deliveries are retaken 8 s after the kill.
      WEBHOOK_LEASE_MS: '8000',
    });
    const db = new TestDb(env);
    const log = new TestLog(env);
    // Until the crash, receiver A hangs (its attempts stay in flight); B answers.
    let phase: 'before' | 'after' = 'before';
    const answeredA = new Set<string>();
    const behaviour: Behaviour = (n, req) => {
      if (phase === 'before') return hang(n, req);
      answeredA.add(req.body.id);
      return { status: 200 };
    };
    receiver.on('/crash-a', behaviour);
    const account = newAccountId();
    await db.subscribe(account, receiver.url('/crash-a'), ['*']);
    await db.subscribe(account, receiver.url('/crash-b'), ['call.started']);

    let child = startChild({ ...env, INSTANCE_ID: uniqueName('crash-1') });
    await waitForGroup(env);
    const first = [...Array(20).keys()].map((n) => envelope(account, n % 2 ? 'call.ended' : 'call.started', { n }));
    await log.publish(first);
    // Attempts to A are hanging now (a new subscription starts with 4 in flight, and a hanging
    // one is cut down from there: the rest of its deliveries wait in the store).
    await receiver.waitFor('/crash-a', 4, 30_000);
    await killed(child);

    // Events that arrive while no delivery process runs.
    const second = [...Array(10).keys()].map((n) => envelope(account, 'call.started', { n: 20 + n }));
    await log.publish(second);
    phase = 'after';
    child = startChild({ ...env, INSTANCE_ID: uniqueName('crash-2') });

    const all = [...first, ...second];
    const expectA = all.map((e) => e.id);
    const expectB = all.filter((e) => e.type === 'call.started').map((e) => e.id);
    const gotB = (): Set<string> => new Set(receiver.received('/crash-b').map((r) => r.body.id));
    await db.until(
      async () => expectA.every((id) => answeredA.has(id)) && expectB.every((id) => gotB().has(id)),
      90_000,
      'every event delivered after the restart',
    );
    // The hung attempts were re-sent under the same delivery ids.
    const aIds = new Set(receiver.received('/crash-a').map((r) => r.headers['x-service-delivery']));
    expect(aIds.size).to.equal(expectA.length);
    await killed(child);
  });
});
