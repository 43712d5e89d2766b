import { expect } from 'chai';
import type { WebhookDoc } from '../../shared/src/mongo/index.js';
import { SecretBox } from '../../shared/src/secrets.js';
import { newWebhookSecret } from '../../shared/src/signing.js';
import { signingSecrets } from './dispatch.js';

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
});
