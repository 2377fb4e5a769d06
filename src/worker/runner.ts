/**
 * A graphile-worker runner that comes back after it stops by itself (docs/operations.md, "During
 * an outage"). graphile-worker 0.18 shuts a whole runner down when it cannot record a job's end
 * (completing or failing it fails while the database is away: "queue is in an inconsistent
 * state") and a runner once stopped stays stopped, so an outage of a few seconds could end a lane
 * for good. `poolWorkerPrematureExit` only covers one worker of a pool exiting; this covers every
 * way the runner ends.
 *
 * While the runner is down the lane is not ready (`down()`), its death is logged once as an error
 * (the cause's code or first line, never a job or its payload), and a new runner is started after
 * RESTART_MIN_MS, doubling up to RESTART_MAX_MS while the database still refuses. Jobs the dead
 * runner's pool still held locked (the ends it could not record) are unlocked as soon as a new
 * runner starts (`app.worker_unlock`): that pool's workers have all exited, and every task is
 * safe to run again (graphile-worker retries them anyway). stop() stops the live runner, cancels a pending
 * restart and never waits on a dead one.
 *
 * A live runner writes its pool id to app_private.worker_heartbeats every HEARTBEAT_INTERVAL_MS
 * (app.worker_heartbeat) and forgets it when stopped; the sweep unlocks the jobs of pools whose
 * process died without a word (src/worker/sweep.ts, WORKER_GONE_SECONDS).
 */
import { EventEmitter } from 'node:events';
import { run, type Runner, type RunnerOptions, type WorkerEvents } from 'graphile-worker';
import type pg from 'pg';
import { callFn } from '../db/pools.js';
import { failureCause, type Logger } from '../log.js';
import { ThrottledWarning } from './outage.js';

export const RESTART_MIN_MS = 1000;
export const RESTART_MAX_MS = 30_000;
const UNLOCK_RETRY_MS = 5000;
/** How often a live runner says so (well under WORKER_GONE_SECONDS). */
export const HEARTBEAT_INTERVAL_MS = 15_000;

export class SupervisedRunner {
  /** One emitter for every runner this starts: a lane's listeners outlive a restart. */
  readonly events = new EventEmitter() as WorkerEvents;
  private runner: Runner | null = null;
  /** The pool id of the live runner (graphile-worker's locked_by). */
  private poolId: string | null = null;
  /** Pool ids of runners that ended, whose locked jobs are still to be unlocked. */
  private readonly deadPools = new Set<string>();
  private isDown = false;
  private stopping = false;
  private timer: NodeJS.Timeout | null = null;
  private unlockTimer: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private beating: Promise<void> = Promise.resolve();
  private restarting: Promise<void> | null = null;
  private lastCause: unknown = null;
  private readonly retrying: ThrottledWarning;
  private readonly beatFailed: ThrottledWarning;

  constructor(
    /** The lane's name in logs and readiness (`jobs`, `syncs`). */
    readonly name: string,
    private readonly options: Omit<RunnerOptions, 'events' | 'pgPool'>,
    private readonly pool: pg.Pool,
    private readonly log: Logger,
  ) {
    this.retrying = new ThrottledWarning(log, `${name} lane: graphile-worker runner could not be restarted; retrying`);
    this.beatFailed = new ThrottledWarning(log, `${name} lane: heartbeat not written`);
    this.events.on('pool:create', ({ workerPool }) => {
      this.poolId = workerPool.id;
    });
    // What ends a runner by itself: remembered for the one error line its death logs.
    this.events.on('pool:fatalError', ({ error }) => {
      this.lastCause = error;
    });
    this.events.on('worker:fatalError', ({ error }) => {
      this.lastCause = error;
    });
    // The pool is shutting down without being asked: the lane is down from now, not from the
    // moment its last in-flight job ends.
    this.events.on('pool:gracefulShutdown', () => {
      if (!this.stopping) this.isDown = true;
    });
  }

  /** Starts the first runner; throws as graphile-worker's run() does (the service does not start). */
  async start(): Promise<void> {
    this.watch(await run({ ...this.options, pgPool: this.pool, events: this.events }));
  }

  /** Why the lane cannot take jobs at all (its runner stopped), or null while it runs. */
  down(): string | null {
    return this.isDown ? 'graphile-worker runner stopped; restarting' : null;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.unlockTimer) clearTimeout(this.unlockTimer);
    this.timer = null;
    await this.restarting;
    const r = this.runner;
    this.runner = null;
    if (!r) return;
    this.stopBeating();
    const poolId = this.poolId;
    // A runner that ended by itself between the check and here rejects "already stopped".
    await r.stop().catch(() => undefined);
    await r.promise.catch(() => undefined);
    await this.beating;
    // Its jobs are completed or released: forget it (the sweep would, 3 minutes on).
    if (poolId) await callFn(this.pool, 'app.worker_heartbeat', [[], [poolId]]).catch(() => undefined);
  }

  private beat(poolId: string): void {
    this.beating = callFn(this.pool, 'app.worker_heartbeat', [[poolId], []])
      .then(() => this.beatFailed.ok(), (err) => this.beatFailed.failed(err));
  }

  private startBeating(poolId: string): void {
    this.stopBeating();
    this.beat(poolId);
    this.heartbeat = setInterval(() => this.beat(poolId), HEARTBEAT_INTERVAL_MS);
    this.heartbeat.unref();
  }

  private stopBeating(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  private watch(r: Runner): void {
    this.runner = r;
    const poolId = this.poolId;
    if (poolId) this.startBeating(poolId);
    const ended = () => {
      if (this.runner !== r || this.stopping) return;
      this.runner = null;
      this.stopBeating();
      this.isDown = true;
      if (poolId) this.deadPools.add(poolId);
      this.log.error({ lane: this.name, cause: this.lastCause ? failureCause(this.lastCause) : null },
        `${this.name} lane: graphile-worker runner stopped; restarting it`);
      this.lastCause = null;
      this.schedule(RESTART_MIN_MS);
    };
    r.promise.then(ended, ended);
  }

  private schedule(delay: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      this.restarting = this.restart(delay).finally(() => {
        this.restarting = null;
      });
    }, delay);
  }

  private async restart(delay: number): Promise<void> {
    let r: Runner;
    try {
      r = await run({ ...this.options, pgPool: this.pool, events: this.events });
    } catch (err) {
      if (!this.stopping) {
        this.retrying.failed(err);
        this.schedule(Math.min(delay * 2, RESTART_MAX_MS));
      }
      return;
    }
    if (this.stopping) {
      await r.stop().catch(() => undefined);
      await r.promise.catch(() => undefined);
      return;
    }
    this.watch(r);
    this.isDown = false;
    this.retrying.ok();
    this.log.info({ lane: this.name }, `${this.name} lane: graphile-worker runner restarted`);
    await this.unlockDeadPools();
  }

  /** Jobs the ended runners still hold locked: due again at once (tried again every UNLOCK_RETRY_MS until it works). */
  private async unlockDeadPools(): Promise<void> {
    const ids = [...this.deadPools];
    if (!ids.length || this.stopping) return;
    try {
      await callFn(this.pool, 'app.worker_unlock', [ids]);
      for (const id of ids) this.deadPools.delete(id);
    } catch (err) {
      this.log.warn({ lane: this.name, cause: failureCause(err) }, `${this.name} lane: could not unlock the stopped runner's jobs; trying again`);
      this.unlockTimer = setTimeout(() => void this.unlockDeadPools(), UNLOCK_RETRY_MS);
      this.unlockTimer.unref();
    }
  }
}
