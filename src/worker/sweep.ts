/**
 * The sweeper: attempts whose worker died (a lease that lapsed without a result) are queued
 * again, webhooks and notifications alike (app.webhook_sweep, app.notification_sweep). Runs from
 * the worker's crontab every minute; leases are WEBHOOK_TIMEOUT_MS + DELIVERY_LEASE_GRACE_MS (30 s), so
 * a dead attempt is sent again within 2 minutes at the defaults. graphile-worker jobs locked by a
 * pool whose process died (no heartbeat for WORKER_GONE_SECONDS; src/worker/runner.ts) are
 * unlocked (app.worker_unlock_gone), so they run again within about 4 minutes, not 4 hours.
 */
import type { Task } from 'graphile-worker';
import { callFn } from '../db/pools.js';
import type { TaskDeps } from './task.js';

/** Extra time past a lapsed lease before the sweeper acts (the lease already includes its grace). */
export const SWEEP_GRACE_SECONDS = 0;

/**
 * A pool that has not written its heartbeat (every HEARTBEAT_INTERVAL_MS, 15 s) for this long, and
 * holds a lock at least this old, is gone: 12 missed heartbeats, and twice the longest a job runs
 * at the defaults (a field-service sync's lease: six WEBHOOK_TIMEOUT_MS and 30 s, 90 s), so even
 * a worker of a version that writes no heartbeat is not mistaken for gone mid-job.
 */
export const WORKER_GONE_SECONDS = 180;

export interface SweepResult {
  webhooks: number;
  notifications: number;
  /** graphile-worker jobs unlocked because the pool that locked them is gone. */
  jobs: number;
}

export async function sweep(deps: Pick<TaskDeps, 'pool'>, graceSeconds = SWEEP_GRACE_SECONDS, goneSeconds = WORKER_GONE_SECONDS): Promise<SweepResult> {
  // Jobs a deferring transaction parked and its process never handed over (src/db/wakeups.ts).
  await callFn<number>(deps.pool, 'app.flush_deferred_jobs', []);
  const webhooks = await callFn<number>(deps.pool, 'app.webhook_sweep', [graceSeconds]);
  const notifications = await callFn<number>(deps.pool, 'app.notification_sweep', [graceSeconds]);
  const jobs = await callFn<number>(deps.pool, 'app.worker_unlock_gone', [goneSeconds]);
  return { webhooks, notifications, jobs };
}

/** The delivery_sweep task; payload `{ grace_seconds, gone_seconds }` overrides the times (tests). */
export function makeSweepTask(deps: TaskDeps): Task {
  return async (payload) => {
    const p = (payload ?? {}) as { grace_seconds?: unknown; gone_seconds?: unknown };
    const grace = typeof p.grace_seconds === 'number' ? Math.floor(p.grace_seconds) : SWEEP_GRACE_SECONDS;
    const gone = typeof p.gone_seconds === 'number' ? Math.floor(p.gone_seconds) : WORKER_GONE_SECONDS;
    const r = await sweep(deps, grace, gone);
    if (r.webhooks || r.notifications) deps.log.warn({ webhooks: r.webhooks, notifications: r.notifications }, 'sweeper re-queued attempts whose worker died');
    if (r.jobs) deps.log.warn({ jobs: r.jobs }, 'sweeper unlocked jobs whose worker is gone');
  };
}
