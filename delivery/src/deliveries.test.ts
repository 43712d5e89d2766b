import { expect } from 'chai';
import type { DeliveryDoc, WebhookDoc } from '#shared/mongo/index.js';
import { subscriptionTakes } from '#shared/eventlog/types.js';
import { predatesEnabling, takesEventType } from './deliveries.js';

const enabledAt = new Date('2026-01-05T00:00:00Z');
const sub = (extra: Partial<WebhookDoc> = {}): WebhookDoc => ({ _id: 'wh_1', account_id: 'acct_1', events: ['*'], enabled: true, enabled_at: enabledAt, ...extra }) as WebhookDoc;
const delivery = (eventAt: string, extra: Partial<DeliveryDoc> = {}): DeliveryDoc =>
  ({ body: JSON.stringify({ id: 'evt_1', type: 'call.started', created_at: eventAt, data: {} }), created_at: new Date('2026-01-06T00:00:00Z'), ...extra }) as DeliveryDoc;

describe('deliveries from before a re-enabling', () => {
  it('stops an event that occurred before enabled_at, not one at or after it', () => {
    expect(predatesEnabling(sub(), delivery('2026-01-04T23:59:59.999Z'))).to.equal(true);
    expect(predatesEnabling(sub(), delivery('2026-01-05T00:00:00.000Z'))).to.equal(false);
    expect(predatesEnabling(sub({ enabled_at: undefined }), delivery('2020-01-01T00:00:00Z')), 'never re-enabled').to.equal(false);
    expect(predatesEnabling(sub(), { ...delivery('x'), body: 'not json' }), 'an unreadable event time does not stop a send').to.equal(false);
  });

  it('judges a resend, recovery or replay by when it was asked for, not by its event', () => {
    const old = '2025-01-01T00:00:00Z';
    expect(predatesEnabling(sub(), delivery(old, { trigger: 'recover', created_at: new Date('2026-01-05T00:00:01Z') })), 'asked after the re-enable').to.equal(false);
    expect(predatesEnabling(sub(), delivery(old, { trigger: 'resend', created_at: new Date('2026-01-04T00:00:00Z') })), 'asked before the disable').to.equal(true);
  });
});

describe('which subscriptions take the operational notifications', () => {
  it('"*" does not; listing the type does, except for the subscription the notification is about', () => {
    expect(takesEventType(sub(), 'webhook.disabled')).to.equal(false);
    expect(takesEventType(sub(), 'call.started')).to.equal(true);
    expect(takesEventType(sub({ events: ['webhook.delivery_exhausted'] }), 'webhook.delivery_exhausted')).to.equal(true);
    expect(subscriptionTakes(sub({ events: ['*'] }), 'webhook.delivery_exhausted', { subscription_id: 'wh_2' })).to.equal(false);
    expect(subscriptionTakes(sub({ events: ['webhook.disabled'] }), 'webhook.disabled', { subscription_id: 'wh_2' })).to.equal(true);
    expect(subscriptionTakes(sub({ events: ['webhook.disabled'] }), 'webhook.disabled', { subscription_id: 'wh_1' })).to.equal(false);
  });
});
