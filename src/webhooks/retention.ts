/**
 * Retention of delivery history (DELIVERY_RETENTION_DAYS): the prune_deliveries task (worker
 * crontab, hourly) deletes delivery attempts, notifications with their log, and settled events
 * older than the window, 1,000 rows per statement. Each batch is its own short transaction (one
 * autocommitted call of app.retention_prune), so no lock is held for long and a large backlog
 * drains in many small steps. See docs/webhooks.md.
 */
import type { Task } from 'graphile-worker';
import { callInBatches } from '../db/pools.js';
import { pruneIdempotency } from '../idempotency/retention.js';
import { PRIVACY_KINDS, prunePrivacy } from '../privacy/retention.js';
import { pruneStaffAudit } from '../staff/retention.js';
import type { TaskDeps } from '../worker/task.js';

/** Rows per statement. */
export const PRUNE_BATCH = 1000;

/** Children before parents: events go only once none of their deliveries and notifications remain. */
export const PRUNE_KINDS = ['deliveries', 'notifications', 'events'] as const;

export interface PruneResult {
  deliveries: number;
  notifications: number;
  events: number;
  /** Statements run (each one short transaction). */
  batches: number;
}

/** Prunes everything older than the retention window, one batch per statement, until none is left. */
export async function pruneDeliveries(deps: Pick<TaskDeps, 'cfg' | 'pool'>, opts: { batch?: number } = {}): Promise<PruneResult> {
  const batch = opts.batch ?? PRUNE_BATCH;
  const result: PruneResult = { deliveries: 0, notifications: 0, events: 0, batches: 0 };
  for (const kind of PRUNE_KINDS) {
    const r = await callInBatches(deps.pool, 'app.retention_prune', [kind, deps.cfg.DELIVERY_RETENTION_DAYS], batch);
    result.batches += r.batches;
    result[kind] += r.rows;
  }
  return result;
}

export function makePruneTask(deps: TaskDeps): Task {
  return async () => {
    const r = await pruneDeliveries(deps);
    if (r.deliveries + r.notifications + r.events > 0) {
      deps.log.info({ task: 'prune_deliveries', retention_days: deps.cfg.DELIVERY_RETENTION_DAYS, ...r }, 'pruned delivery history');
    }
    // Each location's caller-data windows (src/privacy/retention.ts).
    const p = await prunePrivacy(deps);
    if (PRIVACY_KINDS.some((k) => p[k] > 0)) deps.log.info({ task: 'prune_deliveries', ...p }, 'cleared caller data past its retention');
    // Idempotency-Key answers and rate-limit counters (src/idempotency/retention.ts).
    const idem = await pruneIdempotency(deps);
    if (idem.idempotency_keys + idem.rate_limits > 0) deps.log.info({ task: 'prune_deliveries', ...idem }, 'pruned idempotency keys');
    // Staff audit (docs/staff.md): its own retention, STAFF_AUDIT_RETENTION_DAYS.
    const staffAudit = await pruneStaffAudit(deps);
    if (staffAudit > 0) deps.log.info({ task: 'prune_deliveries', retention_days: deps.cfg.STAFF_AUDIT_RETENTION_DAYS, staff_audit: staffAudit }, 'pruned staff audit');
  };
}
