/**
 * Caller-data retention (docs/privacy.md "Retention"): each location's content and personal-data
 * windows (app.privacy_settings) are enforced by the hourly prune_deliveries task, after the
 * delivery history. Every kind is cleared in batches of PRIVACY_BATCH rows, one short
 * autocommitted statement each (app.retention_prune → app.privacy_prune: index-led per location,
 * SKIP LOCKED), so ingestion never waits on a long transaction or lock. Rows stay: counts and
 * insights do not change.
 */
import { callInBatches } from '../db/pools.js';
import type { TaskDeps } from '../worker/task.js';

/** Rows per statement. */
export const PRIVACY_BATCH = 1000;

/** Content first (the cheapest to clear), then the personal fields of each kind. */
export const PRIVACY_KINDS = ['content', 'personal_calls', 'personal_customers', 'personal_leads', 'personal_bookings', 'personal_events', 'personal_integration_syncs'] as const;
export type PrivacyKind = (typeof PRIVACY_KINDS)[number];

export type PrivacyPruneResult = Record<PrivacyKind, number> & { batches: number };

/** Clears everything past its window, one batch per statement, until a batch comes back short. */
export async function prunePrivacy(deps: Pick<TaskDeps, 'pool'>, opts: { batch?: number; kinds?: readonly PrivacyKind[] } = {}): Promise<PrivacyPruneResult> {
  const batch = opts.batch ?? PRIVACY_BATCH;
  const result = Object.fromEntries([...PRIVACY_KINDS.map((k) => [k, 0]), ['batches', 0]]) as PrivacyPruneResult;
  for (const kind of opts.kinds ?? PRIVACY_KINDS) {
    const r = await callInBatches(deps.pool, 'app.retention_prune', [`privacy_${kind}`, 1], batch);
    result.batches += r.batches;
    result[kind] += r.rows;
  }
  return result;
}
