/**
 * The webhook delivery engine (one per worker process; docs/delivery-engine.md), on the shared
 * machinery of src/worker/lease-engine.ts.
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
import type pg from 'pg';
import type { Config } from '../config.js';
import { callFn } from '../db/pools.js';
import type { Logger } from '../log.js';
import { recordWebhookAttempt } from '../metrics/record.js';
import type { ExtraCa } from '../net/ca.js';
import { LeaseEngine, type ClaimBatch } from '../worker/lease-engine.js';
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

export class WebhookEngine extends LeaseEngine<Claim, Result> {
  readonly perEndpoint: number;
  private readonly degradedLimit: number;
  private degradedInFlight = 0;

  constructor(private readonly deps: EngineDeps, opts: EngineOptions = {}) {
    const { cfg } = deps;
    const concurrency = opts.concurrency ?? cfg.WEBHOOK_CONCURRENCY;
    super(deps.pool, deps.log.child({ component: 'webhook-engine' }), {
      ownerPrefix: 'engine',
      channel: WAKE_CHANNEL,
      concurrency,
      pollIntervalMs: opts.pollIntervalMs ?? 1000,
      shutdownGraceMs: opts.shutdownGraceMs ?? 5000,
      sendTimeoutMs: cfg.WEBHOOK_TIMEOUT_MS,
      leaseGraceMs: cfg.DELIVERY_LEASE_GRACE_MS,
    });
    this.perEndpoint = opts.perEndpoint ?? cfg.WEBHOOK_ENDPOINT_CONCURRENCY;
    this.degradedLimit = Math.max(1, Math.floor(concurrency / 2));
    // A failing endpoint is held to half the slots only after its first failure is recorded; until
    // then a receiver that never answers takes as many as the cap lets it, for a whole time-out
    // (docs/performance.md, "what the delivery settings buy": at 64 of 64, 10 s for the paced load).
    if (this.perEndpoint > this.degradedLimit) {
      this.log.warn({ per_endpoint: this.perEndpoint, concurrency },
        'WEBHOOK_ENDPOINT_CONCURRENCY is above half of WEBHOOK_CONCURRENCY: one receiver that never answers can hold more than half of this worker\'s webhook slots until its attempts time out');
    }
  }

  protected claimBatch(free: number): Promise<ClaimBatch<Claim>> {
    return callFn<ClaimBatch<Claim>>(this.pool, 'app.webhook_claim_batch', [
      this.id, free, Math.max(0, this.degradedLimit - this.degradedInFlight), this.perEndpoint, this.leaseMs,
    ]);
  }

  protected keyOf(claim: Claim): string {
    return claim.delivery_id;
  }

  protected resultKey(r: Result): string {
    return r.delivery_id;
  }

  protected onStart(claim: Claim): void {
    if (claim.degraded) this.degradedInFlight += 1;
  }

  protected onEnd(claim: Claim): void {
    if (claim.degraded) this.degradedInFlight -= 1;
  }

  protected async send(claim: Claim, signal: AbortSignal): Promise<Result | null> {
    const result = await sendAttempt(claim, this.deps.cfg, { ca: this.deps.ca, signal });
    if (result.aborted) return null;
    recordWebhookAttempt(result, claim.body, this.deps.cfg.WEBHOOK_TIMEOUT_MS);
    this.log.debug({ delivery_id: claim.delivery_id, event_id: claim.event_id, attempt: claim.attempt, ok: result.ok, status: result.response_status }, 'webhook attempt');
    return { delivery_id: claim.delivery_id, endpoint_id: claim.endpoint_id, result };
  }

  /** The record functions apply the schedule and the endpoint health rules with these settings. */
  private get rules() {
    const { WEBHOOK_RETRY_DELAYS, WEBHOOK_DISABLE_AFTER_FAILURES, WEBHOOK_DISABLE_AFTER_SECONDS } = this.deps.cfg;
    return [WEBHOOK_RETRY_DELAYS, WEBHOOK_DISABLE_AFTER_FAILURES, WEBHOOK_DISABLE_AFTER_SECONDS];
  }

  protected async recordBatch(results: Result[]): Promise<void> {
    await callFn(this.pool, 'app.webhook_record_batch', [JSON.stringify(results), ...this.rules]);
  }

  protected async recordOne(r: Result): Promise<void> {
    await callFn(this.pool, 'app.webhook_record', [r.delivery_id, r.result, ...this.rules]);
  }

  protected withoutReply(r: Result): Result {
    return { ...r, result: { ...r.result, response_body: null, response_headers: {}, error: r.result.error === null ? null : 'the outcome\'s text could not be stored' } };
  }

  protected async release(ids: string[]): Promise<void> {
    await callFn(this.pool, 'app.webhook_release', [this.id, ids]);
  }
}
