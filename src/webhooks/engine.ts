/**
 * The webhook delivery engine (one per worker process; docs/delivery-engine.md).
 *
 * The pending rows of app.webhook_deliveries are the queue. The engine claims due attempts in
 * batches (app.webhook_claim_batch: a short transaction that leases them, enforcing the
 * per-endpoint cap across all workers and a fair order), POSTs them with no database connection
 * held, and records the outcomes in batches (app.webhook_record_batch, another short
 * transaction). At most `concurrency` requests are in flight per process, whatever the pool size;
 * attempts of endpoints whose last attempt failed may fill at most half of them.
 *
 * Wake-ups: NOTIFY switchboard_webhooks (app.webhook_enqueue, when something is due now), a timer
 * for the earliest future due time the claim reports, every record batch (capacity freed), and a
 * poll every `pollIntervalMs` as a safety net.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type pg from 'pg';
import type { Config } from '../config.js';
import { callFn } from '../db/pools.js';
import type { Logger } from '../log.js';
import type { ExtraCa } from '../net/ca.js';
import { sendAttempt, type AttemptResult, type Claim } from './deliver.js';

export const WAKE_CHANNEL = 'switchboard_webhooks';

export interface EngineDeps {
  cfg: Config;
  log: Logger;
  pool: pg.Pool;
  ca?: ExtraCa;
}

export interface EngineOptions {
  /** In-flight requests in this process (default WEBHOOK_CONCURRENCY). */
  concurrency?: number;
  /** In-flight attempts per endpoint across all workers (default WEBHOOK_ENDPOINT_CONCURRENCY). */
  perEndpoint?: number;
  /** Lease = WEBHOOK_TIMEOUT_MS + this (default 30 s): how long a silent worker is trusted. */
  leaseGraceMs?: number;
  /** Safety-net poll when idle (default 1 s). */
  pollIntervalMs?: number;
  /** On stop, how long in-flight attempts may finish before they are aborted and released (default 5 s). */
  shutdownGraceMs?: number;
}

interface Result {
  delivery_id: string;
  endpoint_id: string;
  result: AttemptResult;
}

interface ClaimBatch {
  claims: Claim[];
  next_due_at: string | null;
}

/** At most this many outcomes per record transaction. */
const RECORD_BATCH = 64;
/** Outcomes wait up to this long (or until RECORD_EAGER are ready) to share a record transaction. */
const FLUSH_WAIT_MS = 2;
const RECORD_EAGER = 16;
/** With requests in flight, a claim waits up to this long for enough free slots to make a batch. */
const CLAIM_WAIT_MS = 5;

export class WebhookEngine {
  /** Lease owner name: identifies this process in app.webhook_deliveries.lease_owner. */
  readonly id = `engine:${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  readonly concurrency: number;
  readonly perEndpoint: number;
  private readonly degradedLimit: number;
  /** Free slots worth a claim while others are busy (a quarter of the concurrency). */
  private readonly minBatch: number;
  private readonly leaseMs: number;
  private readonly pollIntervalMs: number;
  private readonly shutdownGraceMs: number;
  private readonly log: Logger;

  private readonly inFlight = new Map<string, { claim: Claim; abort: AbortController; done: Promise<void> }>();
  private degradedInFlight = 0;
  /** Whether the LISTEN connection has been released (by a connection error or by stop()). */
  private listenerState = { released: false };
  private results: Result[] = [];
  private toRelease: string[] = [];
  private flushing: Promise<void> | null = null;
  private flushTimer: NodeJS.Timeout | undefined;
  private claiming: Promise<void> | null = null;
  private claimTimer: NodeJS.Timeout | undefined;
  private again = false;
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeAt = Infinity;
  private listener: pg.PoolClient | undefined;
  private started = false;
  private stopping: Promise<void> | null = null;

  constructor(private readonly deps: EngineDeps, opts: EngineOptions = {}) {
    const { cfg } = deps;
    this.concurrency = opts.concurrency ?? cfg.WEBHOOK_CONCURRENCY;
    this.perEndpoint = opts.perEndpoint ?? cfg.WEBHOOK_ENDPOINT_CONCURRENCY;
    this.degradedLimit = Math.max(1, Math.floor(this.concurrency / 2));
    this.minBatch = Math.max(1, Math.floor(this.concurrency / 4));
    this.leaseMs = cfg.WEBHOOK_TIMEOUT_MS + (opts.leaseGraceMs ?? 30_000);
    this.pollIntervalMs = opts.pollIntervalMs ?? 1000;
    this.shutdownGraceMs = opts.shutdownGraceMs ?? 5000;
    this.log = deps.log.child({ component: 'webhook-engine' });
  }

  /** Attempts being sent right now by this process. */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.listen();
    this.kick();
  }

  /**
   * Asks for a claim pass (coalesced). While other requests are in flight, a claim for only a few
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
        let batch: ClaimBatch;
        try {
          batch = await callFn<ClaimBatch>(this.deps.pool, 'app.webhook_claim_batch', [
            this.id, free, Math.max(0, this.degradedLimit - this.degradedInFlight), this.perEndpoint, this.leaseMs,
          ]);
        } catch (err) {
          this.log.warn({ err }, 'webhook claim failed; retrying');
          this.wake(Date.now() + this.pollIntervalMs);
          return;
        }
        for (const claim of batch.claims) this.startAttempt(claim);
        const nextDue = batch.next_due_at ? Date.parse(batch.next_due_at) : Infinity;
        this.wake(Math.min(nextDue, Date.now() + this.pollIntervalMs));
      } while (this.again);
    } finally {
      this.claiming = null;
    }
  }

  /** One timer: the earliest of the next due attempt and the safety-net poll. */
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

  private startAttempt(claim: Claim): void {
    const abort = new AbortController();
    if (claim.degraded) this.degradedInFlight += 1;
    const done = (this.stopping ? Promise.resolve(null) : sendAttempt(claim, this.deps.cfg, { ca: this.deps.ca, signal: abort.signal }))
      .then((result) => {
        this.inFlight.delete(claim.delivery_id);
        if (claim.degraded) this.degradedInFlight -= 1;
        if (!result || result.aborted) {
          this.toRelease.push(claim.delivery_id);
        } else {
          this.results.push({ delivery_id: claim.delivery_id, endpoint_id: claim.endpoint_id, result });
          this.log.debug({ delivery_id: claim.delivery_id, event_id: claim.event_id, attempt: claim.attempt, ok: result.ok, status: result.response_status }, 'webhook attempt');
        }
        this.scheduleFlush();
      });
    this.inFlight.set(claim.delivery_id, { claim, abort, done });
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

  /** Records finished attempts and gives back abandoned ones; then claims again (capacity freed). */
  private async flush(): Promise<void> {
    const release = this.toRelease.splice(0);
    if (release.length) {
      try {
        await callFn(this.deps.pool, 'app.webhook_release', [this.id, release]);
      } catch (err) {
        this.log.warn({ err, count: release.length }, 'could not release webhook attempts; their leases will lapse');
      }
    }
    // The record functions apply the schedule and the endpoint health rules with these settings.
    const { WEBHOOK_RETRY_DELAYS, WEBHOOK_DISABLE_AFTER_FAILURES, WEBHOOK_DISABLE_AFTER_SECONDS } = this.deps.cfg;
    const rules = [WEBHOOK_RETRY_DELAYS, WEBHOOK_DISABLE_AFTER_FAILURES, WEBHOOK_DISABLE_AFTER_SECONDS];
    while (this.results.length) {
      const batch = this.results.splice(0, RECORD_BATCH);
      try {
        await callFn(this.deps.pool, 'app.webhook_record_batch', [JSON.stringify(batch), ...rules]);
      } catch (err) {
        // One bad outcome must not lose the others: record them one by one. One that still fails
        // keeps its lease; the sweeper re-queues it when the lease lapses (at-least-once).
        this.log.warn({ err, count: batch.length }, 'webhook record batch failed; recording one by one');
        for (const r of batch) {
          try {
            await callFn(this.deps.pool, 'app.webhook_record', [r.delivery_id, r.result, ...rules]);
          } catch (e) {
            this.log.error({ err: e, delivery_id: r.delivery_id }, 'could not record a webhook attempt');
          }
        }
      }
    }
    this.kick();
  }

  private async listen(): Promise<void> {
    if (this.stopping) return;
    let client: pg.PoolClient;
    try {
      client = await this.deps.pool.connect();
    } catch (err) {
      this.log.warn({ err }, 'webhook engine cannot LISTEN yet; polling');
      setTimeout(() => void this.listen(), this.pollIntervalMs).unref();
      return;
    }
    const state = { released: false };
    this.listenerState = state;
    const onError = (err: Error) => {
      // Once per connection: a client released here or by stop() must not be released again.
      if (state.released) return;
      state.released = true;
      this.log.warn({ err }, 'webhook engine lost its LISTEN connection; reconnecting');
      client.removeListener('notification', onNotify);
      if (this.listener === client) this.listener = undefined;
      client.release(true);
      if (!this.stopping) setTimeout(() => void this.listen(), this.pollIntervalMs).unref();
    };
    const onNotify = () => this.kick();
    client.on('notification', onNotify);
    client.once('error', onError);
    try {
      await client.query(`LISTEN ${WAKE_CHANNEL}`);
      this.listener = client;
      this.kick();
    } catch (err) {
      onError(err as Error);
    }
  }

  /**
   * Stops claiming; attempts in flight get `shutdownGraceMs` to finish (and are recorded), then
   * the rest are aborted and released (due again at once for other workers). Resolves when every
   * outcome is recorded or released.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      clearTimeout(this.wakeTimer);
      const listener = this.listener;
      this.listener = undefined;
      if (listener) {
        this.listenerState.released = true;
        listener.removeAllListeners('notification');
        await listener.query(`UNLISTEN ${WAKE_CHANNEL}`).then(() => listener.release(), () => listener.release(true));
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
