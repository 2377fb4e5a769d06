/**
 * The notification engine (one per worker process; docs/notifications.md): the notification
 * lane, on the machinery of src/worker/lease-engine.ts.
 *
 * The pending rows of app.notifications are the queue. The engine leases due ones in batches,
 * emergencies first (app.notification_claim_batch), sends each on its channel with no database
 * connection held (src/notify/send.ts), and records the tries in batches
 * (app.notification_record_batch: the log row, then sent | skipped | failed, or pending again
 * after a backoff). NOTIFY_CONCURRENCY sends in flight per process, apart from the webhook
 * engine's slots, so webhook traffic never takes them.
 *
 * Wake-ups: NOTIFY switchboard_notifications (app.notification_wake, when notifications became
 * due), the next retry's due time, capacity freed, and a poll every `pollIntervalMs`.
 */
import { callFn } from '../db/pools.js';
import { recordNotificationTry } from '../metrics/record.js';
import { LeaseEngine, type ClaimBatch } from '../worker/lease-engine.js';
import { Mailer } from './mailer.js';
import { AbortedError } from './outbound.js';
import { deliver, SendFailure, type NotificationToSend, type SenderDeps } from './send.js';

export const NOTIFY_WAKE_CHANNEL = 'switchboard_notifications';

/** Tries per notification: the fourth failure is final. */
export const NOTIFY_MAX_ATTEMPTS = 4;

export interface NotificationEngineOptions {
  /** Sends in flight in this process (default NOTIFY_CONCURRENCY). */
  concurrency?: number;
  /** Safety-net poll when idle (default 1 s). */
  pollIntervalMs?: number;
  /** On stop, how long sends in flight may finish before they are aborted and released (default 5 s). */
  shutdownGraceMs?: number;
}

/** One try's outcome, as app.notification_record_batch takes it. */
export interface TryOutcome {
  id: string;
  status: 'sent' | 'skipped' | 'failed';
  detail: string;
  response_status: number | null;
  /** A failure not worth retrying (a refused target): final at once. */
  permanent: boolean;
}

export class NotificationEngine extends LeaseEngine<NotificationToSend, TryOutcome> {
  /** Pooled SMTP connections for this engine's e-mail (src/notify/mailer.ts); closed by stop(). */
  private readonly mailer: Mailer;

  constructor(private readonly deps: SenderDeps, opts: NotificationEngineOptions = {}) {
    super(deps.pool, deps.log.child({ component: 'notification-engine' }), {
      ownerPrefix: 'notify',
      channel: NOTIFY_WAKE_CHANNEL,
      concurrency: opts.concurrency ?? deps.cfg.NOTIFY_CONCURRENCY,
      pollIntervalMs: opts.pollIntervalMs ?? 1000,
      shutdownGraceMs: opts.shutdownGraceMs ?? 5000,
      sendTimeoutMs: deps.cfg.WEBHOOK_TIMEOUT_MS,
      leaseGraceMs: deps.cfg.DELIVERY_LEASE_GRACE_MS,
    });
    this.mailer = new Mailer(deps.cfg.SMTP_URL ?? '', deps.cfg.WEBHOOK_TIMEOUT_MS);
  }

  override async stop(): Promise<void> {
    await super.stop();
    this.mailer.close();
  }

  protected claimBatch(free: number): Promise<ClaimBatch<NotificationToSend>> {
    return callFn<ClaimBatch<NotificationToSend>>(this.pool, 'app.notification_claim_batch', [this.id, free, this.leaseMs]);
  }

  protected keyOf(n: NotificationToSend): string {
    return n.id;
  }

  protected resultKey(r: TryOutcome): string {
    return r.id;
  }

  protected async send(n: NotificationToSend, signal: AbortSignal): Promise<TryOutcome | null> {
    try {
      const o = await deliver(this.deps, n, this.mailer, signal);
      recordNotificationTry(n.channel, n.event?.event ?? '', o.status);
      return { id: n.id, status: o.status, detail: o.detail, response_status: o.response_status ?? null, permanent: false };
    } catch (err) {
      if (err instanceof AbortedError) {
        // Shutdown: not a try. Released (due again at once, for this or another worker), nothing logged.
        this.log.info({ notification_id: n.id, channel: n.channel }, 'notification try abandoned on shutdown; queued again');
        return null;
      }
      const f = err instanceof SendFailure ? err : new SendFailure((err as Error).message);
      const last = f.permanent || n.attempts + 1 >= NOTIFY_MAX_ATTEMPTS;
      recordNotificationTry(n.channel, n.event?.event ?? '', 'failed');
      this.log.warn({ notification_id: n.id, channel: n.channel, attempt: n.attempts + 1, last }, 'notification try failed');
      return { id: n.id, status: 'failed', detail: f.message, response_status: f.responseStatus, permanent: f.permanent };
    }
  }

  protected async recordBatch(results: TryOutcome[]): Promise<void> {
    await callFn(this.pool, 'app.notification_record_batch', [this.id, JSON.stringify(results), NOTIFY_MAX_ATTEMPTS]);
  }

  protected recordOne(r: TryOutcome): Promise<void> {
    return this.recordBatch([r]);
  }

  protected withoutReply(r: TryOutcome): TryOutcome {
    return { ...r, detail: `${r.status} (the provider's reply could not be stored)` };
  }

  protected async release(ids: string[]): Promise<void> {
    await callFn(this.pool, 'app.notification_release', [this.id, ids]);
  }
}
