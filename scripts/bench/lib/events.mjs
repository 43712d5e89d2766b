// What the bench ingests: events shaped like the platform's real traffic
// (an inbound SMS), with the send time in `data.t` so receivers can time them.
export const EVENT_TYPE = 'message.received';

export function eventBody(accountId, seq, t = 0) {
  return {
    account_id: accountId,
    type: EVENT_TYPE,
    data: {
      t,
      seq,
      from: '+14155550123',
      to: '+14155550199',
      channel: 'sms',
      text: 'Running about ten minutes late, see you at the usual place.',
    },
  };
}

export function accountIds(prefix, count) {
  return Array.from({ length: count }, (_, i) => `${prefix}_${String(i).padStart(6, '0')}`);
}

/** Bytes of the envelope the API puts on the topic for such an event (the Kafka record value). */
export function envelopeBytes(accountId) {
  const envelope = {
    id: 'evt_' + '0'.repeat(24),
    account_id: accountId,
    type: EVENT_TYPE,
    created_at: new Date().toISOString(),
    data: eventBody(accountId, 123456, Date.now() + 0.123).data,
  };
  return Buffer.byteLength(JSON.stringify(envelope));
}
