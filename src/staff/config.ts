/** The staff GraphQL's limits from the configuration (docs/api-contract.md §3). */
import type { Config } from '../config.js';
import type { StaffLimits } from './access.js';

export function staffLimits(cfg: Pick<Config, 'STAFF_STATEMENT_TIMEOUT_MS' | 'STAFF_MAX_DEPTH' | 'STAFF_MAX_COST'>): StaffLimits {
  return { statementTimeoutMs: cfg.STAFF_STATEMENT_TIMEOUT_MS, maxDepth: cfg.STAFF_MAX_DEPTH, maxCost: cfg.STAFF_MAX_COST };
}
