import { expect } from 'chai';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { SecretBox } from '#shared/secrets.js';
import { newWebhookSecret } from '#shared/signing.js';
import { OpenedSecrets, signingSecrets } from './attempt.js';

describe('the secrets an attempt is signed with', () => {
  const box = new SecretBox(Buffer.alloc(32, 3));
  const current = newWebhookSecret();
  const previous = newWebhookSecret();
  const at = new Date('2026-05-06T07:08:09Z');
  const sub = (extra: Partial<WebhookDoc> = {}): WebhookDoc =>
    ({ _id: 'wh_1', account_id: 'acct_1', secret_enc: box.seal(current, 'wh_1'), ...extra }) as WebhookDoc;

  it('is the current secret alone when nothing was rotated', () => {
    expect(signingSecrets(box, sub(), at)).to.deep.equal([current]);
  });

  it('adds the replaced secret, after the current one, while its grace period lasts, and never from its end on', () => {
    const rotated = (until: Date): WebhookDoc => sub({ previous_secret_enc: box.seal(previous, 'wh_1'), previous_secret_expires_at: until });
    expect(signingSecrets(box, rotated(new Date(at.getTime() + 1)), at)).to.deep.equal([current, previous]);
    expect(signingSecrets(box, rotated(at), at)).to.deep.equal([current]);
    expect(signingSecrets(box, rotated(new Date(at.getTime() - 60_000)), at)).to.deep.equal([current]);
    // A sealed previous secret without an expiry (never written so) signs nothing.
    expect(signingSecrets(box, sub({ previous_secret_enc: box.seal(previous, 'wh_1') }), at)).to.deep.equal([current]);
  });

  it('refuses a previous secret sealed for another subscription rather than sign with it', () => {
    const moved = sub({ previous_secret_enc: box.seal(previous, 'wh_2'), previous_secret_expires_at: new Date(at.getTime() + 60_000) });
    expect(() => signingSecrets(box, moved, at)).to.throw();
  });

  it('decrypts each sealed secret once, opens a rotated one at once, and never remembers one that does not open', () => {
    let opens = 0;
    const counting = { open: (sealed: string, id: string) => (opens++, box.open(sealed, id)) };
    const secrets = new OpenedSecrets(counting, 3);
    const first = sub();
    expect(signingSecrets(secrets, first, at)).to.deep.equal([current]);
    expect(signingSecrets(secrets, first, at)).to.deep.equal([current]);
    expect(opens, 'the second attempt reuses the opened secret').to.equal(1);
    const next = newWebhookSecret();
    expect(signingSecrets(secrets, sub({ secret_enc: box.seal(next, 'wh_1') }), at), 'a rotation signs with the new secret').to.deep.equal([next]);
    expect(opens).to.equal(2);
    // Copied onto another subscription: refused each time, not remembered under either id.
    expect(() => secrets.open(first.secret_enc, 'wh_2')).to.throw();
    expect(() => secrets.open(first.secret_enc, 'wh_2')).to.throw();
    // Bounded: past `max` entries it starts over.
    for (let i = 0; i < 5; i++) secrets.open(box.seal(newWebhookSecret(), 'wh_1'), 'wh_1');
    expect(signingSecrets(secrets, first, at)).to.deep.equal([current]);
  });
});
