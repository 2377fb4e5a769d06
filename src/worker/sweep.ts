/**
 * The sweeper: attempts whose worker died (a lease that lapsed without a result) are queued
 * again, webhooks and notifications alike (app.webhook_sweep, app.notification_sweep). Runs from
 * the worker's crontab every minute; leases are WEBHOOK_TIMEOUT_MS + DELIVERY_LEASE_GRACE_MS (30 s), so
 * a dead attempt is sent again within 2 minutes at the defaults.
 */
import type { Task } from 'graphile-worker';
import { callFn } from '../db/pools.js';
import type { TaskDeps } from './task.js';

/** Extra time past a lapsed lease before the sweeper acts (the lease already includes its grace). */
export const SWEEP_GRACE_SECONDS = 0;

export interface SweepResult {
  webhooks: number;
  notifications: number;
}

export async function sweep(deps: Pick<TaskDeps, 'pool'>, graceSeconds = SWEEP_GRACE_SECONDS): Promise<SweepResult> {
  // Jobs a deferring transaction parked and its process never handed over (src/db/wakeups.ts).
  await callFn<number>(deps.pool, 'app.flush_deferred_jobs', []);
  const webhooks = await callFn<number>(deps.pool, 'app.webhook_sweep', [graceSeconds]);
  const notifications = await callFn<number>(deps.pool, 'app.notification_sweep', [graceSeconds]);
  return { webhooks, notifications };
}

/** The delivery_sweep task; payload `{ grace_seconds }` overrides the grace (tests). */
export function makeSweepTask(deps: TaskDeps): Task {
  return async (payload) => {
    const p = (payload ?? {}) as { grace_seconds?: unknown };
    const grace = typeof p.grace_seconds === 'number' ? Math.floor(p.grace_seconds) : SWEEP_GRACE_SECONDS;
    const r = await sweep(deps, grace);
    if (r.webhooks || r.notifications) deps.log.warn(r, 'sweeper re-queued attempts whose worker died');
  };
}
