/**
 * Retention of Idempotency-Key answers (24 h) and of the shared rate limit's counters of past
 * minutes: run by the hourly prune_deliveries task after the delivery history, through the same
 * app.retention_prune, one short transaction per batch (docs/rest-api.md "Idempotency-Key").
 */
import { callInBatches } from '../db/pools.js';
import type { TaskDeps } from '../worker/task.js';

export const IDEMPOTENCY_PRUNE_KINDS = ['idempotency_keys', 'rate_limits'] as const;

export type IdempotencyPruneResult = Record<(typeof IDEMPOTENCY_PRUNE_KINDS)[number], number>;

export async function pruneIdempotency(deps: Pick<TaskDeps, 'cfg' | 'pool'>, opts: { batch?: number } = {}): Promise<IdempotencyPruneResult> {
  const batch = opts.batch ?? 1000;
  const result: IdempotencyPruneResult = { idempotency_keys: 0, rate_limits: 0 };
  for (const kind of IDEMPOTENCY_PRUNE_KINDS) {
    result[kind] = (await callInBatches(deps.pool, 'app.retention_prune', [kind, deps.cfg.DELIVERY_RETENTION_DAYS], batch)).rows;
  }
  return result;
}
