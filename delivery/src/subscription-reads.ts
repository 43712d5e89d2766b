/**
 * The read of a subscription right before a send, shared between the sends
 * that wait for it. The rule it keeps: a send that becomes ready after a
 * DELETE or PATCH returned sees that change, so the read it uses must have
 * started after it became ready. A read already in flight may have started
 * earlier, so a caller arriving meanwhile waits for the next read, which
 * starts when the one in flight ends and serves every caller that arrived
 * during it. Under load a subscription so costs one read per round trip to
 * the store, however many of its deliveries are sent meanwhile; with little
 * traffic it is one read per send, as before.
 */
import type { WebhookDoc } from '#shared/mongo/index.js';

type Load = (id: string) => Promise<WebhookDoc | null>;

interface Slot {
  current: Promise<WebhookDoc | null> | null;
  next: Promise<WebhookDoc | null> | null;
}

export class SubscriptionReads {
  private readonly slots = new Map<string, Slot>();
  /** Reads sent to the store (for the store-operations figure). */
  reads = 0;

  constructor(private readonly load: Load) {}

  /** The subscription as read by a query that started after this call (null: deleted). */
  read(id: string): Promise<WebhookDoc | null> {
    let slot = this.slots.get(id);
    if (!slot) {
      slot = { current: null, next: null };
      this.slots.set(id, slot);
    }
    if (!slot.current) return this.start(id, slot);
    if (slot.next) return slot.next;
    const s = slot;
    slot.next = s.current!.then(
      () => this.start(id, s, true),
      () => this.start(id, s, true),
    );
    return slot.next;
  }

  private start(id: string, slot: Slot, fromNext = false): Promise<WebhookDoc | null> {
    if (fromNext) slot.next = null;
    this.reads++;
    const p = this.load(id);
    slot.current = p;
    const clear = (): void => {
      if (slot.current !== p) return;
      slot.current = null;
      if (!slot.next) this.slots.delete(id);
    };
    p.then(clear, clear);
    return p;
  }
}
