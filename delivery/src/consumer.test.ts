import { expect } from 'chai';
import type { EventEnvelope } from '../../shared/src/eventlog/types.js';
import type { WebhookDoc } from '../../shared/src/mongo/index.js';
import { matches } from './consumer.js';

const sub = (extra: Partial<WebhookDoc> = {}): WebhookDoc =>
  ({ _id: 'wh_1', account_id: 'acct_1', events: ['*'], created_at: new Date('2026-01-01T00:00:00Z'), ...extra }) as WebhookDoc;
const event = (at: string): EventEnvelope => ({ id: 'evt_1', account_id: 'acct_1', type: 'call.started', created_at: at, data: {} }) as EventEnvelope;

describe('matching events to subscriptions', () => {
  it('treats a subscription stored without `enabled` as enabled', () => {
    expect(matches(sub(), event('2026-01-02T00:00:00Z'))).to.equal(true);
    expect(matches(sub({ enabled: true }), event('2026-01-02T00:00:00Z'))).to.equal(true);
  });

  it('matches nothing for a disabled subscription', () => {
    expect(matches(sub({ enabled: false }), event('2026-01-02T00:00:00Z'))).to.equal(false);
  });

  it('after a re-enable, matches only events at or after enabled_at (as after created_at)', () => {
    const reenabled = sub({ enabled: true, enabled_at: new Date('2026-01-05T00:00:00Z') });
    expect(matches(reenabled, event('2026-01-04T23:59:59.999Z'))).to.equal(false);
    expect(matches(reenabled, event('2026-01-05T00:00:00Z'))).to.equal(true);
    expect(matches(sub(), event('2025-12-31T23:59:59Z'))).to.equal(false);
  });
});
