import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { run, Logger as WorkerLogger, type Runner, type Task, type TaskList } from 'graphile-worker';
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

/** tasks/ beside this module's tree: the .ts sources from src/, the compiled .js from dist/. */
export const tasksFolder = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'tasks');

export async function loadTasks(deps: TaskDeps): Promise<TaskList> {
  const list: TaskList = {};
  const files = fs.existsSync(tasksFolder)
    ? fs.readdirSync(tasksFolder).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts'))
    : [];
  for (const file of files.sort()) {
    const mod = (await import(pathToFileURL(path.join(tasksFolder, file)).href)) as { default: TaskFactory };
    list[file.replace(/\.(ts|js)$/, '')] = mod.default(deps);
  }
  return list;
}

/**
 * Recurring jobs. webhook_sweep re-queues webhook attempts that are overdue and not held by a
 * live worker, so a crashed worker delays a delivery by about a minute, not graphile-worker's
 * four-hour lock expiry.
 */
const CRONTAB = ['* * * * * webhook_sweep'].join('\n');

export interface WorkerOptions {
  concurrency?: number;
  /** How often an idle worker polls for due jobs (ms); tests shorten it. */
  pollInterval?: number;
}

export async function startWorker(deps: TaskDeps, { concurrency = 5, pollInterval = 1000 }: WorkerOptions = {}): Promise<Runner> {
  const taskList = await loadTasks(deps);
  const log = deps.log.child({ component: 'worker' });
  return run({
    pgPool: deps.pool,
    concurrency,
    noHandleSignals: true,
    pollInterval,
    taskList,
    crontab: CRONTAB,
    logger: new WorkerLogger((scope) => (level, message, meta) => {
      const fn = level === 'error' ? log.error : level === 'warning' ? log.warn : log.debug;
      fn.call(log, { scope, meta }, message);
    }),
  });
}
