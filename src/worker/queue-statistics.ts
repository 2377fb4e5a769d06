/**
 * The queues' statistics, kept current by the worker (docs/performance.md, "The twenty-sixth
 * round"). The claims and records run on plans made from the planner's statistics of the moment,
 * and autovacuum's ANALYZE visits a table at most once a minute by default: a burst that grows
 * app.webhook_deliveries or app.notifications many times over inside that minute left every
 * worker session reading the whole table for each claim. Every QUEUE_STATISTICS_INTERVAL_MS each
 * worker asks app.queue_statistics_refresh, which ANALYZEs a queue table whose statistics are far
 * out of date (one worker at a time; the others return at once) and costs a look at
 * pg_stat_user_tables otherwise.
 */
import type pg from 'pg';
import { callFn } from '../db/pools.js';
import type { Logger } from '../log.js';
import { ThrottledWarning } from './outage.js';

export const QUEUE_STATISTICS_INTERVAL_MS = 5_000;

export class QueueStatistics {
  private timer: NodeJS.Timeout | null = null;
  /** The look in progress, if any: a tick that finds one skips (it would find nothing left to do). */
  private running: Promise<void> | null = null;
  private readonly failures: ThrottledWarning;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
    private readonly intervalMs = QUEUE_STATISTICS_INTERVAL_MS,
  ) {
    this.failures = new ThrottledWarning(log, 'queue statistics: refresh failed; retried');
  }

  async start(): Promise<void> {
    this.timer = setInterval(() => {
      this.running ??= this.refresh().then(() => {
        this.running = null;
      });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** One look: the tables it analysed (logged), or none. Failures are logged, throttled, never thrown. */
  async refresh(): Promise<string[]> {
    const started = Date.now();
    try {
      const analysed = await callFn<string[]>(this.pool, 'app.queue_statistics_refresh', []);
      this.failures.ok();
      if (analysed.length) this.log.info({ tables: analysed, ms: Date.now() - started }, 'queue statistics refreshed (ANALYZE)');
      return analysed;
    } catch (err) {
      this.failures.failed(err);
      return [];
    }
  }

  /** No new look starts; one in progress is waited for. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
