/**
 * The attempt stage: reads the subscription under the fence, signs, sends.
 *
 * The subscription is read right before each attempt, so a deleted or
 * disabled subscription gets nothing, a rotated secret signs the very next
 * attempt (with the replaced one beside it until its grace period ends) and a
 * changed url is where it goes.
 */
import type { DeliveryDoc, WebhookDoc } from '#shared/mongo/index.js';
import type { SecretBox } from '#shared/secrets.js';
import { signDelivery } from '#shared/signing.js';
import { SEND_READ_MAX_AGE_MS, sendingState } from '#shared/subscription-fence.js';
import { headersAad, maySet } from '#shared/webhook-headers.js';
import { predatesEnabling, takesEventType, type AttemptRecord, type DeliveryCollections } from './deliveries.js';
import type { Sender, SendGate } from './http-sender.js';
import { isPermanentFailure, nextDelay } from './retry-policy.js';
import { SubscriptionReads } from './subscription-reads.js';
import type { SubscriptionTable } from './subscription-table.js';

interface AttemptDeps {
  collections: Pick<DeliveryCollections, 'webhooks'>;
  sender: Sender;
  box: Pick<SecretBox, 'open'>;
  retrySchedule: number[];
  clock: () => Date;
  /** Subscriptions in memory: the pre-send read comes from it while its latest load is recent enough (subscription-table.ts). */
  table?: SubscriptionTable;
}

/** What an attempt came to: nothing sent (the subscription is gone or disabled), or sent with this record. */
type Tried = { kind: 'gone' } | { kind: 'disabled' } | { kind: 'sent'; outcome: AttemptRecord };

export class Attempts {
  /** The read of each subscription right before sending, shared by the sends waiting for it. */
  private readonly subscriptions: SubscriptionReads;
  /** Signing secrets, decrypted once each. */
  private readonly secrets: OpenedSecrets;

  constructor(private readonly deps: AttemptDeps) {
    this.subscriptions = new SubscriptionReads((id) => deps.collections.webhooks.findOne({ _id: id }));
    this.secrets = new OpenedSecrets(deps.box);
  }

  /**
   * Reads the subscription and sends one attempt under that read. The
   * request is written only under a read that started at most
   * SEND_READ_MAX_AGE_MS before (shared/src/subscription-fence.ts): after a
   * slow DNS answer, connect or handshake the subscription is read again,
   * and a request prepared under a state that changed meanwhile (deleted,
   * disabled, another URL or secret, an events list without this type) is
   * dropped unwritten and, unless the subscription is gone, disabled or no
   * longer takes the type, prepared again under the new state.
   */
  async attempt(delivery: DeliveryDoc, admit: (sub: WebhookDoc) => Promise<void>): Promise<Tried> {
    for (let admitted = false; ; ) {
      const read = await this.readForSend(delivery.subscription_id, delivery.event_type);
      let asked = read.asked;
      const sub = read.sub;
      // Deleted, or no longer taking this event type (PATCH events): dropped unsent.
      if (!sub || !takesEventType(sub, delivery.event_type)) return { kind: 'gone' };
      // Disabled, or re-enabled since this delivery's event occurred: given up unsent.
      if (sub.enabled === false || predatesEnabling(sub, delivery)) return { kind: 'disabled' };
      // Its rate limit (a token, waited for if need be) once per delivery, not per re-prepared request.
      if (!admitted) await admit(sub);
      admitted = true;
      const state = sendingState(sub);
      const ready = (): boolean => performance.now() - asked <= SEND_READ_MAX_AGE_MS;
      const gate: SendGate = {
        ready,
        refresh: async (pending) => {
          while (!ready()) {
            // The attempt timed out while the store was too slow to answer a fresh read: stop reading.
            if (!pending()) return false;
            const again = await this.readForSend(delivery.subscription_id, delivery.event_type);
            asked = again.asked;
            if (!again.sub || sendingState(again.sub) !== state || !takesEventType(again.sub, delivery.event_type)) return false;
          }
          return true;
        },
      };
      const outcome = await send(this.deps, this.secrets, delivery, sub, gate);
      if (outcome) return { kind: 'sent', outcome };
    }
  }

  /**
   * The subscription as read by a query that started at `asked` (monotonic
   * ms; null: deleted): from the table when its latest load started at most
   * SEND_READ_MAX_AGE_MS ago and lets the send go ahead, else from the store,
   * by a read started now.
   */
  private async readForSend(id: string, eventType: string): Promise<{ sub: WebhookDoc | null; asked: number }> {
    const cached = this.deps.table?.forSend(id, eventType);
    if (cached) return cached;
    const asked = performance.now();
    return { sub: await this.subscriptions.read(id), asked };
  }
}

/**
 * The secrets an attempt at `at` is signed with: the current one, then the
 * one a rotation replaced while its grace period lasts (never after).
 */
export function signingSecrets(box: Pick<SecretBox, 'open'>, sub: WebhookDoc, at: Date): string[] {
  const secrets = [box.open(sub.secret_enc, sub._id)];
  const until = sub.previous_secret_expires_at;
  if (sub.previous_secret_enc && until && until.getTime() > at.getTime()) secrets.push(box.open(sub.previous_secret_enc, sub._id));
  return secrets;
}

/**
 * SecretBox.open remembered per (sealed value, subscription): one AES-GCM
 * decryption per secret instead of one per attempt (~3% of a healthy
 * delivery's CPU in a profile). A rotation stores a new sealed value,
 * so the next attempt opens (and signs with) the new secret; a value that
 * does not open is never remembered and throws each time.
 */
export class OpenedSecrets {
  private readonly opened = new Map<string, string>();

  constructor(
    private readonly box: Pick<SecretBox, 'open'>,
    private readonly max = 10_000,
  ) {}

  open(sealed: string, associatedData: string): string {
    const key = associatedData + '\n' + sealed;
    let plain = this.opened.get(key);
    if (plain === undefined) {
      plain = this.box.open(sealed, associatedData);
      if (this.opened.size >= this.max) this.opened.clear();
      this.opened.set(key, plain);
    }
    return plain;
  }
}

/**
 * The subscription's custom headers as read for this send (a PATCH that
 * returned before the read applies, queued retries included); {} when none.
 */
function customHeaders(secrets: Pick<OpenedSecrets, 'open'>, sub: Pick<WebhookDoc, '_id' | 'headers_enc'>): Record<string, string> {
  if (!sub.headers_enc) return {};
  const stored = JSON.parse(secrets.open(sub.headers_enc, headersAad(sub._id))) as Record<string, string>;
  // The API refuses the service's own and hop-by-hop names; a document written otherwise gets none of them through.
  return Object.fromEntries(Object.entries(stored).filter(([name]) => maySet(name)));
}

/** One attempt under `sub`, on the subscription's own connections; null when nothing was sent (the gate withheld the request, or no connection came free in time). */
async function send(deps: AttemptDeps, secrets: OpenedSecrets, delivery: DeliveryDoc, sub: WebhookDoc, gate: SendGate): Promise<AttemptRecord | null> {
  const at = deps.clock();
  const headers = {
    // First, so that nothing of the service's own is ever overridden (the API refuses those names anyway).
    ...customHeaders(secrets, sub),
    ...signDelivery(signingSecrets(secrets, sub, at), delivery._id, delivery.body, at),
    'X-Service-Event': delivery.event_type,
    'X-Service-Delivery': delivery._id,
  };
  const result = await deps.sender.send(sub.url, delivery.body, headers, { account: sub.account_id, subscription: sub._id }, gate);
  if (!result) return null;
  const number = delivery.attempts + 1;
  const delay = result.outcome === 'ok' || isPermanentFailure(result) ? null : nextDelay(number, deps.retrySchedule, result);
  const finished = new Date(at.getTime() + result.durationMs);
  return {
    delivery,
    attempt: number,
    status: result.status,
    outcome: result.outcome,
    error: result.error,
    durationMs: result.durationMs,
    at,
    nextAttemptAt: delay === null ? null : new Date(finished.getTime() + delay),
  };
}
