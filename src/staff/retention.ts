/**
 * Retention of the staff audit (STAFF_AUDIT_RETENTION_DAYS, default 365; docs/staff.md "Audit"):
 * run by the hourly prune_deliveries task after the delivery history, one short transaction per
 * batch of 1,000 rows (staff.audit_prune, the only way rows leave the append-only table).
 */
import type pg from 'pg';
import type { Config } from '../config.js';
import { callInBatches } from '../db/pools.js';

export async function pruneStaffAudit(deps: { cfg: Pick<Config, 'STAFF_AUDIT_RETENTION_DAYS'>; pool: pg.Pool }, batch = 1000): Promise<number> {
  return (await callInBatches(deps.pool, 'staff.audit_prune', [deps.cfg.STAFF_AUDIT_RETENTION_DAYS], batch)).rows;
}
