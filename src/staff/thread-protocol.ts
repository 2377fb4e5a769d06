/**
 * What the main thread and the staff GraphQL's thread or child process (src/staff/thread.ts,
 * src/admin/graphql-thread.ts) send each other.
 */
import type { StaffLimits } from './access.js';

/** The environment variable that carries StaffThreadData to a child process. */
export const STAFF_CHILD_ENV = 'SWITCHBOARD_STAFF_GRAPHQL_DATA';

export interface StaffThreadData {
  target: string;
  limits: StaffLimits;
  logLevel: string;
  /** On the embedded cluster: nice of the staff backends, and the postmaster's pid. */
  nice: number | null;
  postmasterPid: number | null;
  /** Nice of this thread itself (STAFF_DB_NICE): the API's threads get the CPU first. */
  threadNice: number;
}

export type ToThread = { type: 'target'; target: string; postmasterPid: number | null } | { type: 'flush'; id: number } | { type: 'close' };
export type FromThread = { type: 'listening'; url: string } | { type: 'refused'; reason: 'busy' } | { type: 'admission'; running: number; queued: number } | { type: 'flushed'; id: number } | { type: 'closed' } | { type: 'failed'; message: string };

