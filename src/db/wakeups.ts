/**
 * Wake-ups deferred past a commit. A transaction that NOTIFYs holds PostgreSQL's notification
 * queue lock from its commit until its WAL is flushed, so NOTIFYing transactions commit one at a
 * time. Voice ingestion therefore runs with `defer_wakeups`: its jobs wait in
 * app_private.deferred_jobs and nobody is notified; after the commit the route awaits `flush()`,
 * which runs app.flush_deferred_jobs() (all parked jobs in one batch, one NOTIFY for the
 * graphile-worker runners and one for the webhook engines) before it answers. At most one flush
 * is in flight per process: callers that arrive meanwhile share one more flush after it, so under
 * load one flush covers many calls and no ingestion transaction waits on the notification lock. If the process dies between a commit and its flush, the worker's
 * delivery_sweep (every minute) flushes what was left. See docs/performance.md.
 */
import type pg from 'pg';
import type { Logger } from '../log.js';

export class DeferredWakeups {
  private inflight: Promise<void> | null = null;
  private next: Promise<void> | null = null;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
  ) {}

  /**
   * Resolves once a flush that started after this call has finished, so what the caller
   * committed before calling is in graphile-worker's queue. Never rejects: a failed flush leaves
   * the jobs parked for the next flush or the sweep.
   */
  flush(): Promise<void> {
    if (!this.inflight) {
      this.inflight = this.run().finally(() => {
        this.inflight = null;
      });
      return this.inflight;
    }
    // The running flush may have started before the caller's commit: join the one after it.
    this.next ??= this.inflight.then(() => {
      this.next = null;
      return this.flush();
    });
    return this.next;
  }

  /** Resolves when no flush is in flight or waiting (shutdown). */
  async idle(): Promise<void> {
    while (this.inflight || this.next) await (this.next ?? this.inflight);
  }

  private async run(): Promise<void> {
    try {
      await this.pool.query({ name: 'sb:flush_deferred_jobs', text: 'select app.flush_deferred_jobs()' });
    } catch (err) {
      this.log.warn({ err }, 'flushing deferred jobs failed; the next flush or the sweep adds them');
    }
  }
}
