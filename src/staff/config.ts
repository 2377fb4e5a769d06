/** The staff GraphQL's limits from the configuration (docs/api-contract.md §3). */
import type { Config } from '../config.js';
import type { AdmissionLimits } from './admission.js';

/** What one request may ask for and answer (src/staff/bounds.ts, docs/staff.md "Timeouts and bounds"). */
export interface StaffBounds {
  maxDepth: number;
  maxCost: number;
  maxAliases: number;
  maxRows: number;
  maxGroups: number;
  maxAnswerBytes: number;
  maxDocumentBytes: number;
}

export const DEFAULT_STAFF_BOUNDS: StaffBounds = {
  maxDepth: 10, maxCost: 50_000, maxAliases: 20, maxRows: 1000, maxGroups: 1000, maxAnswerBytes: 2_000_000, maxDocumentBytes: 100_000,
};

/** The bounds and the statement timeout of every staff request, and how many run at once (src/staff/admission.ts). */
export interface StaffLimits extends StaffBounds, AdmissionLimits {
  /** statement_timeout of every staff transaction (STAFF_STATEMENT_TIMEOUT_MS). */
  statementTimeoutMs: number;
}

type StaffConfig = Pick<Config, 'STAFF_STATEMENT_TIMEOUT_MS' | 'STAFF_MAX_DEPTH' | 'STAFF_MAX_COST' | 'STAFF_MAX_ALIASES' | 'STAFF_MAX_ROWS'
  | 'STAFF_MAX_GROUPS' | 'STAFF_MAX_ANSWER_BYTES' | 'STAFF_MAX_DOCUMENT_BYTES' | 'STAFF_MAX_RUNNING' | 'STAFF_MAX_QUEUED' | 'STAFF_TIME_SHARE'>;

export function staffLimits(cfg: StaffConfig): StaffLimits {
  return {
    statementTimeoutMs: cfg.STAFF_STATEMENT_TIMEOUT_MS, maxDepth: cfg.STAFF_MAX_DEPTH, maxCost: cfg.STAFF_MAX_COST,
    maxAliases: cfg.STAFF_MAX_ALIASES, maxRows: cfg.STAFF_MAX_ROWS, maxGroups: cfg.STAFF_MAX_GROUPS,
    maxAnswerBytes: cfg.STAFF_MAX_ANSWER_BYTES, maxDocumentBytes: cfg.STAFF_MAX_DOCUMENT_BYTES,
    maxRunning: cfg.STAFF_MAX_RUNNING, maxQueued: cfg.STAFF_MAX_QUEUED, timeShare: cfg.STAFF_TIME_SHARE,
  };
}
