/**
 * The machinery both delivery engines share (docs/delivery-engine.md): a table's pending rows
 * are the queue; an engine claims due rows in batches with a lease (one short transaction),
 * sends them with no database connection held, and records the outcomes in batches (another
 * short transaction). At most `concurrency` sends are in flight per process.
 *
 * Wake-ups: a NOTIFY on the engine's channel (something became due now), a timer for the earliest
 * future due time the claim reports, every finished send and every record batch (capacity freed),
 * and a poll every `pollIntervalMs` as a safety net.
 *
 * A subclass says how to claim, send, record and release; src/webhooks/engine.ts (webhook
 * attempts) and src/notify/engine.ts (notifications) are the two.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type pg from 'pg';
import type { Logger } from '../log.js';
import { isConnectionError, ThrottledWarning } from './outage.js';

export interface LeaseEngineSettings {
  /** Lease owner prefix (`engine`, `notify`): the owner name is `<prefix>:<host>:<pid>:<random>`. */
  ownerPrefix: string;
  /** LISTEN channel that wakes the engine. */
  channel: string;
  /** Sends in flight in this process. */
  concurrency: number;
  /** Safety-net poll when idle (ms). */
  pollIntervalMs: number;
  /** On stop, how long sends in flight may finish before they are aborted and released (ms). */
  shutdownGraceMs: number;
  /** A send's own time-out (ms); its lease lasts that plus `leaseGraceMs`. */
  sendTimeoutMs: number;
  /** How long past the send time-out a silent engine is still trusted (DELIVERY_LEASE_GRACE_MS; the sweeper acts then). */
  leaseGraceMs: number;
}

/** What a claim transaction returns: the leased rows and, when known, the next due time. */
export interface ClaimBatch<C> {
  claims: C[];
  next_due_at: string | null;
}

/** At most this many outcomes per record transaction. */
const RECORD_BATCH = 64;
/** Outcomes wait up to this long (or until RECORD_EAGER are ready) to share a record transaction. */
const FLUSH_WAIT_MS = 2;
const RECORD_EAGER = 16;
/** With sends in flight, a claim waits up to this long for enough free slots to make a batch. */
const CLAIM_WAIT_MS = 5;

/**
 * Whether the LISTEN connection has been released (by a connection error or by stop()), and its
 * error listener, which stop() takes off the connection it gives back to the pool.
 */
interface ListenerState {
  released: boolean;
  onError?: (err: Error) => void;
}

/** C: a claimed row; R: its outcome (null from `send` = abandoned unsent, to be released). */
export abstract class LeaseEngine<C, R> {
  /** Lease owner name: identifies this process in the queue table's lease_owner. */
  readonly id: string;
  readonly concurrency: number;
  /** Free slots worth a claim while others are busy (a quarter of the concurrency). */
  private readonly minBatch: number;
  /** How long a claimed row stays leased to this engine (send time-out + grace). */
  protected readonly leaseMs: number;
  protected readonly pollIntervalMs: number;
  private readonly shutdownGraceMs: number;
  private readonly channel: string;

  private readonly inFlight = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private listenerState: ListenerState = { released: false };
  private listening: Promise<void> | null = null;
  private results: R[] = [];
  private toRelease: string[] = [];
  private flushing: Promise<void> | null = null;
  private flushTimer: NodeJS.Timeout | undefined;
  private claiming: Promise<void> | null = null;
  private claimTimer: NodeJS.Timeout | undefined;
  private again = false;
  /**
   * The last claim leased fewer rows than it had free slots for: what is due ran out first, or its
   * endpoints are at their caps. A send that ends frees a slot, not work (its lease counts against
   * its endpoint until its record), so until a record, a release, a wake-up or a timer asks again,
   * an ending send does not ask for a claim of its own.
   */
  private ranShort = false;
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeAt = Infinity;
  private listener: pg.PoolClient | undefined;
  private started = false;
  private stopping: Promise<void> | null = null;
  /** When a claim last succeeded (ms since the epoch; 0 = never): the worker's readiness reads it. */
  lastClaimAt = 0;
  /** Claim and LISTEN failures during an outage: one line per interval, with a count. */
  private readonly claimWarning: ThrottledWarning;
  private readonly listenWarning: ThrottledWarning;
  /** Outcomes that could not be recorded because the database is away (their leases lapse; sent again). */
  private readonly recordWarning: ThrottledWarning;

  protected constructor(protected readonly pool: pg.Pool, protected readonly log: Logger, s: LeaseEngineSettings) {
    this.id = `${s.ownerPrefix}:${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.concurrency = s.concurrency;
    this.minBatch = Math.max(1, Math.floor(s.concurrency / 4));
    this.leaseMs = s.sendTimeoutMs + s.leaseGraceMs;
    this.pollIntervalMs = s.pollIntervalMs;
    this.shutdownGraceMs = s.shutdownGraceMs;
    this.channel = s.channel;
    this.claimWarning = new ThrottledWarning(log, 'claim failed; retrying');
    this.listenWarning = new ThrottledWarning(log, 'LISTEN connection unavailable; polling meanwhile');
    this.recordWarning = new ThrottledWarning(log, 'database unavailable: outcomes not recorded; their leases lapse and they are sent again');
  }

  /** Leases up to `free` due rows. */
  protected abstract claimBatch(free: number): Promise<ClaimBatch<C>>;
  /** The claimed row's id (the key of its lease). */
  protected abstract keyOf(claim: C): string;
  /** The id of the row an outcome is for (its claim's keyOf). */
  protected abstract resultKey(result: R): string;
  /** Sends one claimed row; null when the send was abandoned (shutdown) and the row is to be released. */
  protected abstract send(claim: C, signal: AbortSignal): Promise<R | null>;
  /** Records outcomes in one transaction. */
  protected abstract recordBatch(results: R[]): Promise<void>;
  /** Records one outcome (after a batch failed, so one bad outcome does not lose the others). */
  protected abstract recordOne(result: R): Promise<void>;
  /** The outcome without the receiver's text (what a database may refuse): recorded when the whole cannot be. */
  protected abstract withoutReply(result: R): R;
  /** Gives back rows abandoned unsent: due again at once, for this or another engine. */
  protected abstract release(ids: string[]): Promise<void>;
  /** Called as a claimed row starts and as it ends (a subclass's own accounting). */
  protected onStart(_claim: C): void {}
  protected onEnd(_claim: C): void {}

  /** Sends being made right now by this process. */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Every slot is busy sending: no claim is due until one frees (sends have their own time-out). */
  get saturated(): boolean {
    return this.inFlight.size >= this.concurrency;
  }

  protected get isStopping(): boolean {
    return this.stopping !== null;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.listen();
    this.kick();
  }

  /**
   * Asks for a claim pass (coalesced). While other sends are in flight, a claim for only a few
   * free slots waits up to CLAIM_WAIT_MS for more to free up, so claims come in batches.
   */
  kick(force = false): void {
    if (this.stopping) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    const free = this.concurrency - this.inFlight.size;
    if (free <= 0) return;
    if (!force && free < this.minBatch && this.inFlight.size > 0) {
      this.claimTimer ??= setTimeout(() => {
        this.claimTimer = undefined;
        this.kick(true);
      }, CLAIM_WAIT_MS);
      return;
    }
    clearTimeout(this.claimTimer);
    this.claimTimer = undefined;
    this.claiming = this.claimLoop();
  }

  /** Claims until nothing asked for another pass meanwhile; `claiming` is cleared right after the last check. */
  private async claimLoop(): Promise<void> {
    try {
      do {
        this.again = false;
        if (this.stopping) return;
        const free = this.concurrency - this.inFlight.size;
        if (free <= 0) return;
        let batch: ClaimBatch<C>;
        try {
          batch = await this.claimBatch(free);
          this.ranShort = batch.claims.length < free;
          this.lastClaimAt = Date.now();
          this.claimWarning.ok();
        } catch (err) {
          this.claimWarning.failed(err);
          this.wake(Date.now() + this.pollIntervalMs);
          return;
        }
        for (const claim of batch.claims) this.startSend(claim);
        const nextDue = batch.next_due_at ? Date.parse(batch.next_due_at) : Infinity;
        this.wake(Math.min(nextDue, Date.now() + this.pollIntervalMs));
      } while (this.again);
    } finally {
      this.claiming = null;
    }
  }

  /** One timer: the earliest of the next due row and the safety-net poll. */
  private wake(at: number): void {
    if (this.stopping) return;
    if (this.wakeTimer && at >= this.wakeAt) return;
    clearTimeout(this.wakeTimer);
    this.wakeAt = at;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = undefined;
      this.wakeAt = Infinity;
      this.kick();
    }, Math.max(0, at - Date.now()) + 2);
    this.wakeTimer.unref();
  }

  private startSend(claim: C): void {
    const key = this.keyOf(claim);
    const abort = new AbortController();
    this.onStart(claim);
    const done = (this.stopping ? Promise.resolve(null) : this.send(claim, abort.signal))
      .catch((err: unknown) => {
        // A send is meant to turn every failure into an outcome; one that throws anyway must not
        // keep its slot: the row is released (due again) and the error logged.
        this.log.error({ err, id: key }, 'send failed unexpectedly; released');
        return null;
      })
      .then((result) => {
        this.inFlight.delete(key);
        this.onEnd(claim);
        if (result === null) this.toRelease.push(key);
        else this.results.push(result);
        this.scheduleFlush();
        // The slot is free now: claim for it beside the record, not after it. The attempt's lease
        // still counts against its endpoint's cap until the record ends it, so the cap holds; after
        // a claim that ran short, only the record can free anything, and it claims when it ends.
        if (!this.ranShort) this.kick();
      });
    this.inFlight.set(key, { abort, done });
  }

  /** Outcomes are recorded in batches: one flush at a time, each waiting briefly for company. */
  private scheduleFlush(): void {
    if (this.flushing || this.flushTimer) return;
    const ready = this.results.length + this.toRelease.length;
    if (!ready) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.flushing = this.flush().finally(() => {
        this.flushing = null;
        this.scheduleFlush();
      });
    }, ready >= RECORD_EAGER || this.stopping ? 0 : FLUSH_WAIT_MS);
  }

  /** Records finished sends and gives back abandoned ones; then claims again (capacity freed). */
  private async flush(): Promise<void> {
    const release = this.toRelease.splice(0);
    if (release.length) {
      try {
        await this.release(release);
      } catch (err) {
        if (isConnectionError(err)) this.recordWarning.failed(err);
        else this.log.warn({ err, count: release.length }, 'could not release claimed rows; their leases will lapse');
      }
    }
    while (this.results.length) {
      const batch = this.results.splice(0, RECORD_BATCH);
      try {
        await this.recordBatch(batch);
        this.recordWarning.ok();
      } catch (err) {
        if (isConnectionError(err)) {
          // A lost connection: once more on another. If the database is away, no outcome of the
          // batch can be recorded now: their leases lapse and the sweeper queues them again
          // (at-least-once), as for a worker that died; one line per interval says so.
          try {
            await this.recordBatch(batch);
            this.recordWarning.ok();
          } catch (again) {
            this.recordWarning.failed(again);
          }
          continue;
        }
        // One bad outcome must not lose the others: record them one by one. One that still fails
        // keeps its lease; the sweeper queues it again when the lease lapses (at-least-once).
        this.log.warn({ err, count: batch.length }, 'record batch failed; recording one by one');
        for (const r of batch) {
          try {
            await this.recordOne(r);
          } catch (e) {
            // The outcome's id only: its detail quotes the receiver, which may echo caller data.
            if (isConnectionError(e)) {
              this.recordWarning.failed(e);
              continue;
            }
            try {
              await this.recordOne(this.withoutReply(r));
              this.log.warn({ err: e, id: this.resultKey(r) }, 'outcome recorded without the reply the database refused');
            } catch (bare) {
              this.log.error({ err: bare, id: this.resultKey(r) }, 'could not record an outcome; its lease lapses and it is sent again');
            }
          }
        }
      }
    }
    this.kick();
  }

  /** Opens the LISTEN connection; stop() waits for an opening in progress, so it gives that one back too. */
  private listen(): Promise<void> {
    this.listening = this.openListener();
    return this.listening;
  }

  private async openListener(): Promise<void> {
    if (this.stopping) return;
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      this.listenWarning.failed(err);
      setTimeout(() => void this.listen(), this.pollIntervalMs).unref();
      return;
    }
    const state: ListenerState = { released: false };
    this.listenerState = state;
    const onError = (err: Error) => {
      // Once per connection: a client released here or by stop() must not be released again.
      if (state.released) return;
      state.released = true;
      this.listenWarning.failed(err);
      client.removeListener('notification', onNotify);
      if (this.listener === client) this.listener = undefined;
      client.release(true);
      if (!this.stopping) setTimeout(() => void this.listen(), this.pollIntervalMs).unref();
    };
    const onNotify = () => this.kick();
    state.onError = onError;
    client.on('notification', onNotify);
    client.once('error', onError);
    try {
      await client.query(`LISTEN ${this.channel}`);
      this.listener = client;
      this.listenWarning.ok();
      this.kick();
    } catch (err) {
      onError(err as Error);
    }
  }

  /**
   * Stops claiming; sends in flight get `shutdownGraceMs` to finish (and are recorded), then the
   * rest are aborted and released (due again at once for other workers). Resolves when every
   * outcome is recorded or released.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      clearTimeout(this.wakeTimer);
      // A connection still being opened (at start, or again after a connection error) would
      // otherwise LISTEN after this and stay checked out, and the pool's end() would wait for it.
      await this.listening;
      const listener = this.listener;
      this.listener = undefined;
      if (listener) {
        this.listenerState.released = true;
        listener.removeAllListeners('notification');
        // The connection goes back to the pool: a listener left on it would outlive this engine,
        // one more for every engine that ever listened on it.
        if (this.listenerState.onError) listener.removeListener('error', this.listenerState.onError);
        await listener.query(`UNLISTEN ${this.channel}`).then(() => listener.release(), () => listener.release(true));
      }
      clearTimeout(this.claimTimer);
      await this.claiming;
      const all = () => Promise.all([...this.inFlight.values()].map((a) => a.done));
      if (this.inFlight.size) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([all(), new Promise<void>((r) => (timer = setTimeout(r, this.shutdownGraceMs)))]);
        clearTimeout(timer);
        for (const a of this.inFlight.values()) a.abort.abort();
        await all();
      }
      while (this.flushing || this.flushTimer || this.results.length || this.toRelease.length) {
        if (this.flushing) await this.flushing;
        else if (this.flushTimer) await new Promise((r) => setTimeout(r, FLUSH_WAIT_MS));
        else await this.flush();
      }
    })();
    return this.stopping;
  }
}
