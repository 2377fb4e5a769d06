/**
 * The contract between the worker and its tasks. Each file in tasks/ is a thin adapter: it
 * default-exports a TaskFactory that hands these deps to a `make…Task` function in src/, where
 * the task's code lives (docs/decisions.md "Worker tasks"). Kept apart from src/worker/index.ts,
 * which loads tasks/, so neither a task nor its code imports the runner.
 */
import type { Task } from 'graphile-worker';
import type pg from 'pg';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';

/** What every task factory receives. */
export interface TaskDeps {
  cfg: Config;
  log: Logger;
  /** Owner pool; tasks call SQL functions that set the tenant themselves. */
  pool: pg.Pool;
  /**
   * Extra CA certificates (PEM) to trust for outbound HTTPS, on top of the public roots. Tests
   * pass their throwaway CA; production leaves it unset and relies on NODE_EXTRA_CA_CERTS.
   */
  ca?: string;
}

/** A file in tasks/ default-exports one of these; the file name is the task identifier. */
export type TaskFactory = (deps: TaskDeps) => Task;
