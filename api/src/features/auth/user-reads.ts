import type { Collection } from 'mongodb';
import type { UserDoc } from '#shared/mongo/index.js';

/**
 * Reads of a user by id, concurrent lookups of one user sharing the read in
 * flight. Every session-token request checks its user still exists; when many
 * of one user's requests arrive together (a dashboard's or an agent's
 * long-polls coming back at once) they share one read rather than each
 * sending one. Nothing is kept once the read returns, and a user document
 * never changes after signup, so a shared read is as fresh as one's own.
 */
export class UserReads {
  private readonly inFlight = new Map<string, Promise<UserDoc | null>>();

  constructor(private readonly users: Collection<UserDoc>) {}

  /** The user, or null. */
  find(userId: string): Promise<UserDoc | null> {
    const known = this.inFlight.get(userId);
    if (known) return known;
    const read = this.users.findOne({ _id: userId }).finally(() => this.inFlight.delete(userId));
    this.inFlight.set(userId, read);
    return read;
  }
}
