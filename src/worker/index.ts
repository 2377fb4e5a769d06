/**
 * The worker process: four lanes that cannot take each other's capacity (docs/delivery-engine.md).
 *
 * - Webhooks: the delivery engine (src/webhooks/engine.ts), WEBHOOK_CONCURRENCY requests in flight,
 *   WEBHOOK_ENDPOINT_CONCURRENCY per endpoint across all workers.
 * - Notifications: the notification engine (src/notify/engine.ts), NOTIFY_CONCURRENCY sends in
 *   flight of its own, so webhook traffic never occupies them; emergencies are claimed first.
 * - Jobs: a small graphile-worker runner for everything else in tasks/ (finalize_call, the cron
 *   sweeper and pruning).
 * - Syncs: a graphile-worker runner of its own for field-service syncs. Each runner is restarted
 *   when it stops by itself (src/worker/runner.ts).
 *
 * Beside them, each worker keeps the queue tables' planner statistics current
 * (src/worker/queue-statistics.ts). Every file in tasks/ is a thin adapter over code in src/
 * (src/worker/task.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Logger as WorkerLogger, type RunnerOptions, type TaskList } from 'graphile-worker';
import type { Logger } from '../log.js';
import { safeWorkerLog } from '../privacy/log-safe.js';
import { engineLane, jobsLane, registerLanes, type Lane } from './health.js';
import { ThrottledWarning } from './outage.js';
import { QueueStatistics } from './queue-statistics.js';
import { SupervisedRunner } from './runner.js';
import { NotificationEngine, type NotificationEngineOptions } from '../notify/engine.js';
import { WebhookEngine, type EngineOptions } from '../webhooks/engine.js';
import type { TaskDeps, TaskFactory } from './task.js';

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
 * Recurring jobs. delivery_sweep re-queues webhook and notification attempts whose worker died
 * (lease lapsed without a result), so a crash delays a delivery by at most about 100 s, and
 * unlocks graphile-worker jobs of pools that stopped writing heartbeats, so a crash delays a job
 * by about 4 minutes, not graphile-worker's four-hour lock expiry. prune_deliveries (hourly) applies DELIVERY_RETENTION_DAYS.
 */
const CRONTAB = ['* * * * * delivery_sweep', '17 * * * * prune_deliveries', '* * * * * integration_sync_sweep'].join('\n');

/**
 * graphile-worker completes and fails jobs without awaiting the query unless batching is on; at
 * shutdown the last completions could still be in flight when the pool is ended, leaving finished
 * jobs locked for four hours. With a batch delay the runner's stop() waits for them.
 */
const GRAPHILE_PRESET: RunnerOptions['preset'] = { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } };

export interface WorkerOptions {
  /** Concurrency of the jobs lane (finalize_call, cron tasks). */
  jobsConcurrency?: number;
  /** How often an idle runner polls for due jobs (ms); tests shorten it. */
  pollInterval?: number;
  /** Webhook engine settings (defaults from the config). */
  engine?: EngineOptions;
  /** Notification engine settings (defaults from the config). */
  notifyEngine?: NotificationEngineOptions;
  /** Run the crontab (default true). */
  cron?: boolean;
  /** How often the queues' statistics are looked at (ms; src/worker/queue-statistics.ts); tests shorten it. */
  statisticsIntervalMs?: number;
}

export interface Worker {
  engine: WebhookEngine;
  notify: NotificationEngine;
  /** The graphile-worker runners: finalize_call and the crons; field-service syncs. */
  jobs: SupervisedRunner;
  syncs: SupervisedRunner;
  /** In-flight work finishes or is released; then every lane stops (a stopped runner is not waited on). */
  stop(): Promise<void>;
  /** The lanes whose claims readiness checks (src/worker/health.ts). */
  lanes: Lane[];
}

/** graphile-worker's complaints that the database is away: one line per interval while it lasts. */
const DATABASE_AWAY = /ECONNREFUSED|ECONNRESET|Connection terminated|terminating connection|the database system is|timeout exceeded when trying to connect|connect ETIMEDOUT|is not queryable/i;

/**
 * graphile-worker's start-up warning that the pool has fewer connections than a runner has jobs in
 * flight. It assumes each job holds a connection while it runs; ours take one only for each short
 * statement (a sync claims, calls the provider with no connection held, then records), so the
 * worker pool's 12 serve the syncs runner's INTEGRATION_SYNC_CONCURRENCY (16) and the alarm would
 * be false on every start. It stays at debug.
 */
const POOL_SMALLER_THAN_CONCURRENCY = /^WARNING: having maxPoolSize \(\d+\) smaller than concurrency/;

/** One logger for both runners: their complaints during one outage share one throttle. */
export function workerLogger(log: Logger): WorkerLogger {
  const away = new ThrottledWarning(log, 'jobs lane: database unavailable; graphile-worker retries');
  return new WorkerLogger((scope) => (level, message, meta) => {
    if ((level === 'error' || level === 'warning') && DATABASE_AWAY.test(message)) {
      away.failed(new Error(message));
      return;
    }
    const quiet = level === 'warning' && POOL_SMALLER_THAN_CONCURRENCY.test(message);
    const fn = level === 'error' ? log.error : level === 'warning' && !quiet ? log.warn : log.debug;
    const { fields, msg } = safeWorkerLog(message, meta as Record<string, unknown> | undefined);
    fn.call(log, { scope, ...fields }, msg);
  });
}

export async function startWorker(deps: TaskDeps, { jobsConcurrency = 2, pollInterval = 1000, engine: engineOpts, notifyEngine: notifyOpts, cron = true, statisticsIntervalMs }: WorkerOptions = {}): Promise<Worker> {
  const taskList = await loadTasks(deps);
  const log = deps.log.child({ component: 'worker' });

  const started: Array<{ stop(): Promise<void> }> = [];
  try {
    // Field-service syncs get a runner of their own (src/integrations/sync.ts): a slow provider
    // never takes the slots of finalize_call and the cron tasks.
    const { integration_sync: syncTask, ...otherTasks } = taskList;
    const logger = workerLogger(log);
    const jobs = new SupervisedRunner('jobs', {
      noHandleSignals: true, pollInterval, logger, preset: GRAPHILE_PRESET,
      concurrency: jobsConcurrency, taskList: otherTasks, ...(cron ? { crontab: CRONTAB } : { parsedCronItems: [] }),
    }, deps.pool, log);
    started.push(jobs);
    await jobs.start();
    const syncs = new SupervisedRunner('syncs', {
      noHandleSignals: true, pollInterval, logger, preset: GRAPHILE_PRESET,
      concurrency: deps.cfg.INTEGRATION_SYNC_CONCURRENCY, taskList: { integration_sync: syncTask }, parsedCronItems: [],
    }, deps.pool, log);
    started.push(syncs);
    await syncs.start();
    const notify = new NotificationEngine(deps, { pollIntervalMs: pollInterval, ...notifyOpts });
    started.push(notify);
    await notify.start();
    const engine = new WebhookEngine({ cfg: deps.cfg, log: deps.log, pool: deps.pool, ca: deps.ca }, engineOpts);
    started.push(engine);
    await engine.start();
    const statistics = new QueueStatistics(deps.pool, log, statisticsIntervalMs);
    started.push(statistics);
    await statistics.start();
    const lanes = [engineLane('webhooks', engine), engineLane('notifications', notify),
      jobsLane(jobs, jobsConcurrency), jobsLane(syncs, deps.cfg.INTEGRATION_SYNC_CONCURRENCY)];
    const unregister = registerLanes(lanes);
    let stopping: Promise<void> | null = null;
    return {
      engine,
      notify,
      jobs,
      syncs,
      lanes,
      stop: () =>
        (stopping ??= Promise.all([engine.stop(), notify.stop(), jobs.stop(), syncs.stop(), statistics.stop()]).then(() => {
          unregister();
        })),
    };
  } catch (err) {
    await Promise.allSettled(started.map((s) => s.stop()));
    throw err;
  }
}
