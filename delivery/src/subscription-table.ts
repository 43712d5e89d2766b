/**
 * Every subscription, in memory, reloaded in full every REFRESH_MS, so the
 * hot path (matching a batch's events, the read right before a send) needs no
 * store query while the table is fresh enough for it.
 *
 * A load is one `webhooks.find({})` (the fields matching and sending need);
 * one starts every REFRESH_MS, even while the previous one still runs (at
 * most MAX_LOADS_IN_FLIGHT at once): loads run one after another with a
 * pause between would leave the table too old for sends
 * (SEND_READ_MAX_AGE_MS) whenever a busy store slows a load past the pause,
 * and every send would then wait for a store read (docs/performance.md,
 * "Delivery"). For the latest-started completed load the table remembers when
 * it STARTED, on the wall clock (`loadedFrom`, compared with events'
 * `created_at`) and on the monotonic clock (compared with the send fence):
 * everything stored before that moment is in it. A failed load keeps the
 * previous table, which then ages out of both freshness rules below and the
 * callers fall back to their store queries (correct, slower).
 *
 * - Fresh for a batch of events: `loadedFrom >= newest created_at -
 *   ACTIVATION_SLACK_MS`. A subscription active for an event was stored at
 *   least SUBSCRIPTION_FENCE_MS / 2 before the event's `created_at`
 *   (shared/src/subscription-fence.ts), so such a load contains it.
 * - Fresh for a send: the load started at most SEND_READ_MAX_AGE_MS ago
 *   (monotonic): it is then as good as the pre-send read it replaces for
 *   a send it lets go ahead. A subscription it lacks, or holds disabled or
 *   without the event's type, is read from the store (`forSend`).
 *
 * Scaling: a scan of N subscriptions per REFRESH_MS per process. Beyond some N
 * the scan takes long, the table is seldom fresh and every batch falls back to
 * its queries (docs/decisions.md; the next step is a change log).
 */
import type { Collection, Document } from 'mongodb';
import type { Logger } from '#shared/log.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { ACTIVATION_SLACK_MS, SEND_READ_MAX_AGE_MS } from '#shared/subscription-fence.js';
import { takesEventType } from './deliveries.js';

/** How often a load of the table starts (from the previous load's start). */
const REFRESH_MS = 250;

/** Loads running at once at most (a store slower than REFRESH_MS gets no more than this many scans). */
const MAX_LOADS_IN_FLIGHT = 2;

/** What matching and sending read of a subscription. */
const PROJECTION = {
  _id: 1,
  account_id: 1,
  url: 1,
  events: 1,
  enabled: 1,
  enabled_at: 1,
  created_at: 1,
  rate_limit: 1,
  ordering: 1,
  secret_enc: 1,
  secret_gen: 1,
  previous_secret_enc: 1,
  previous_secret_expires_at: 1,
  headers_enc: 1,
} as const;

/** The part of the collection the table uses (an in-memory stand-in in unit tests). */
export interface SubscriptionSource {
  loadAll(): Promise<WebhookDoc[]>;
}

export function collectionSource(webhooks: Collection<WebhookDoc>): SubscriptionSource {
  return { loadAll: () => webhooks.find({}, { projection: PROJECTION as Document }).toArray() as Promise<WebhookDoc[]> };
}

interface Clocks {
  /** Wall clock, ms (compared with events' created_at). */
  wall: () => number;
  /** Monotonic, ms (compared with the send fence). */
  mono: () => number;
}

const realClocks: Clocks = { wall: () => Date.now(), mono: () => performance.now() };

export class SubscriptionTable {
  private byId = new Map<string, WebhookDoc>();
  private byAccount = new Map<string, WebhookDoc[]>();
  /** Wall-clock start of the latest completed load (-Infinity: none yet). */
  loadedFrom = -Infinity;
  /** Monotonic start of the latest completed load. */
  private loadedMono = -Infinity;
  private timer: NodeJS.Timeout | null = null;
  /** Loads in flight, oldest first (at most MAX_LOADS_IN_FLIGHT). */
  private loading: { mono: number; done: Promise<void> }[] = [];
  private stopped = false;
  /** Loads completed / failed (tests, metrics). */
  loads = 0;
  failures = 0;

  constructor(
    private readonly source: SubscriptionSource,
    private readonly log?: Logger,
    private readonly clocks: Clocks = realClocks,
  ) {}

  /** Loads once, then every REFRESH_MS (counted from each load's start) until stop(). */
  start(): void {
    this.stopped = false;
    this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await Promise.all(this.loading.map((l) => l.done.catch(() => undefined)));
  }

  private tick(): void {
    if (this.stopped) return;
    void this.load();
    this.timer = setTimeout(() => this.tick(), REFRESH_MS);
    this.timer.unref();
  }

  /**
   * A load that started at most REFRESH_MS ago, shared by concurrent
   * callers; else a new one, unless MAX_LOADS_IN_FLIGHT are running (the
   * newest of them is shared then). Loads may overlap: under a slow store a
   * load that takes longer than REFRESH_MS no longer delays the start of the
   * next one, so the table stays fresh enough for sends while each load takes
   * up to SEND_READ_MAX_AGE_MS - REFRESH_MS. A load's result replaces the
   * table only if it started after the load the table holds; a failure keeps
   * the previous table.
   */
  load(): Promise<void> {
    const newest = this.loading[this.loading.length - 1];
    if (newest && (this.clocks.mono() - newest.mono < REFRESH_MS || this.loading.length >= MAX_LOADS_IN_FLIGHT)) return newest.done;
    const wall = this.clocks.wall();
    const mono = this.clocks.mono();
    const done = this.source
      .loadAll()
      .then((docs) => {
        this.loads++;
        if (mono <= this.loadedMono) return; // a later-started load already landed
        const byId = new Map<string, WebhookDoc>();
        const byAccount = new Map<string, WebhookDoc[]>();
        for (const d of docs) {
          byId.set(d._id, d);
          const list = byAccount.get(d.account_id);
          if (list) list.push(d);
          else byAccount.set(d.account_id, [d]);
        }
        this.byId = byId;
        this.byAccount = byAccount;
        this.loadedFrom = wall;
        this.loadedMono = mono;
      })
      .catch((err: unknown) => {
        this.failures++;
        this.log?.info({ err }, 'could not reload the subscription table; keeping the previous one (queries meanwhile)');
      })
      .finally(() => {
        this.loading = this.loading.filter((l) => l.done !== done);
      });
    this.loading.push({ mono, done });
    return done;
  }

  /**
   * The subscriptions of `accounts` when the table holds every subscription
   * active for an event created at or before `newestEventAt` (ms); null when
   * it is not fresh enough (query the store instead).
   */
  forEvents(accounts: string[], newestEventAt: number): Map<string, WebhookDoc[]> | null {
    if (!(this.loadedFrom >= newestEventAt - ACTIVATION_SLACK_MS)) return null;
    const out = new Map<string, WebhookDoc[]>();
    for (const a of accounts) {
      const list = this.byAccount.get(a);
      if (list) out.set(a, list);
    }
    return out;
  }

  /**
   * The subscription as of a load that started at most SEND_READ_MAX_AGE_MS
   * ago, with that start (monotonic ms), when that load lets the send of an
   * `eventType` event go ahead: it holds the subscription, enabled and
   * taking the type. Null otherwise (read the store instead): the table is
   * older, or its answer would stop the send. Such a load may predate a
   * create or re-enable that the consumer's matching already saw in the
   * store (activation comes only half a fence after the write, the load may
   * be SEND_READ_MAX_AGE_MS old), so absent or disabled here means unknown,
   * never deleted or disabled: the store's answer decides.
   */
  forSend(id: string, eventType: string): { sub: WebhookDoc; asked: number } | null {
    if (this.clocks.mono() - this.loadedMono > SEND_READ_MAX_AGE_MS) return null;
    const sub = this.byId.get(id);
    if (!sub || sub.enabled === false || !takesEventType(sub, eventType)) return null;
    return { sub, asked: this.loadedMono };
  }
}
