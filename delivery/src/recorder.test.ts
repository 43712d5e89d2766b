import { expect } from 'chai';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import type { AttemptRecord } from './deliveries.js';
import { attemptDoc, deliveryUpdate } from './attempt-docs.js';
import { AttemptRecorder } from './recorder.js';
import { subscriptionUpdates } from './status-writer.js';

function record(sub: string, atMs: number, status: number | null, extra: Partial<AttemptRecord> = {}): AttemptRecord {
  const delivery = { _id: `dlv_${sub}_${atMs}`, subscription_id: sub, claim_seq: 3, attempts: 0 } as unknown as DeliveryDoc;
  return { delivery, attempt: 1, status, outcome: status === 200 ? 'ok' : 'http_5xx', error: null, durationMs: 10, at: new Date(atMs), nextAttemptAt: new Date(atMs + 5000), ...extra };
}

describe('attempt recorder', () => {
  it('writes one last_* update per subscription: the attempt that started last, guarded against later ones already stored', () => {
    const ops = subscriptionUpdates([record('wh_a', 2000, 200), record('wh_b', 1500, 500), record('wh_a', 3000, 503), record('wh_a', 1000, 200)]);
    expect(ops).to.have.length(2);
    const [filter, update] = ops.find(([f]) => f._id === 'wh_a') as [any, any];
    expect(update.$set).to.deep.equal({ last_status: 503, last_delivery_at: new Date(3000), last_error: null });
    expect(filter).to.deep.equal({ _id: 'wh_a', last_delivery_at: { $lte: new Date(3000) } });
  });

  it('moves a delivery on only while this process still holds its claim', () => {
    const [filter, update] = deliveryUpdate(record('wh_a', 1000, 200)) as [any, any];
    expect(filter).to.deep.equal({ _id: 'dlv_wh_a_1000', claim_seq: 3 });
    expect(update.$set).to.include({ state: 'succeeded', attempts: 1, next_attempt_at: null, lease_owner: null, last_status: 200 });
    const retry = (deliveryUpdate(record('wh_a', 1000, 500)) as any)[1].$set;
    expect(retry.state).to.equal('pending');
    expect(retry.next_attempt_at).to.deep.equal(new Date(6000));
    const last = (deliveryUpdate(record('wh_a', 1000, 500, { nextAttemptAt: null })) as any)[1].$set;
    expect(last.state).to.equal('failed');
  });

  it("copies the delivery's trigger into its attempt; a delivery without one (the consumer's own) leaves it out, read as `event`", () => {
    const plain = record('wh_a', 1000, 500);
    expect(attemptDoc(plain, 'att_1')).to.not.have.property('trigger');
    const resent = { ...plain, delivery: { ...plain.delivery, trigger: 'resend' as const } };
    expect(attemptDoc(resent, 'att_2').trigger).to.equal('resend');
  });
});

describe('attempt recorder: a store write that never answers', () => {
  it('takes a write with no answer within its limit as failed and writes the record again (one writer is not held for good)', async () => {
    let calls = 0;
    const written: string[] = [];
    // A stand-in store whose first insert of attempts never answers (as a stalled server), and every later one does.
    const noop = async (): Promise<unknown> => ({});
    const collection = new Proxy({}, { get: () => noop });
    const attempts = {
      insertMany: (docs: { _id: string }[]) => {
        calls += 1;
        if (calls === 1) return new Promise(() => undefined);
        written.push(...docs.map((d) => d._id));
        return Promise.resolve({});
      },
    };
    const c = new Proxy({ attempts } as Record<string, unknown>, { get: (t, k) => (k in t ? t[k as string] : collection) }) as unknown as ConstructorParameters<typeof AttemptRecorder>[0];
    const recorder = new AttemptRecorder(c, undefined, undefined, { writeLimitMs: 100 });
    const ok = record('wh_a', 1000, 200, { nextAttemptAt: null });
    await recorder.record(ok, 'att_stalled', true);
    expect(calls).to.equal(2);
    expect(written).to.deep.equal(['att_stalled']);
  });
});
