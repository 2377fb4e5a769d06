/**
 * What one process holds of the embedded cluster (docs/operations.md, "Supervision"). Exactly one
 * process supervises the cluster at a time: the one holding the supervisor lock (lock.ts).
 *
 * - The first process to start takes the lock and supervises: it starts the cluster (initdb
 *   first when there is none), or adopts one left running by a supervisor that died.
 * - Every other process attaches to the running cluster and waits on the lock. When the
 *   supervisor dies (crash, OOM kill, kill -9), the kernel hands the lock to one of them, which
 *   adopts the postmaster (or, when it is down, has it started again) and supervises from then on.
 * - The supervisor tells `onUnexpectedExit` listeners when the postmaster exits without stop(),
 *   and restart() starts it again on the same data (src/db/supervisor.ts decides when).
 * - stop() of the supervisor stops the cluster and releases the lock; of any other process,
 *   stops waiting. A process that ends without stop() still stops the cluster it supervises.
 */
import path from 'node:path';
import type { Logger } from '../../log.js';
import { postmasterPid, runningPort } from './attach.js';
import type { EmbeddedCluster, UrlMaker } from './cluster.js';
import type { SupervisorLock } from './lock.js';
import { adopted, ownChild, type Postmaster } from './postmaster.js';
import { prepareCluster, type Prepared } from './prepare.js';
import { EMBEDDED_DATABASE, ensureDatabaseOrExplain, startServer, type Running } from './server.js';

type ExitListener = (exit: { code: number | null; signal: string | null }) => void;

/** Its methods are bound (arrow functions): callers pass them around (postmasterPid, for one). */
export class ClusterHandle implements EmbeddedCluster {
  private supervising = false;
  private pm: Postmaster | null = null;
  private stopped = false;
  /** A start in progress: stop() waits for it, then stops what it started. */
  private starting: Promise<Running> | null = null;
  private prepared: Promise<Prepared> | null = null;
  private readonly exitListeners: ExitListener[] = [];
  private readonly signalHandlers: [NodeJS.Signals, () => void][] = [];
  private readonly onProcessExit = () => {
    // The process ends without stop() (an uncaught error, process.exit): the cluster still stops.
    if (this.pm?.alive()) {
      try {
        process.kill(this.pm.pid, 'SIGINT');
      } catch {
        /* gone */
      }
    }
  };

  constructor(
    private readonly dataDir: string,
    private readonly password: string,
    private readonly lock: SupervisorLock,
    private readonly make: UrlMaker,
    private readonly log: Logger,
    /** The port last seen: an attached process dials it while the cluster is down. */
    private lastPort: number,
  ) {}

  private get pgDir() {
    return path.join(this.dataDir, 'pg');
  }

  /** True while this process supervises the cluster (and so stops it). */
  get owned(): boolean {
    return this.supervising;
  }

  /** The supervisor's own postmaster's port; any other process reads postmaster.pid (the port may change on a restart). */
  private port(): number {
    if (this.supervising && this.pm) return this.pm.port;
    return (this.lastPort = runningPort(this.pgDir) ?? this.lastPort);
  }

  get url(): string {
    return this.make(this.port())(EMBEDDED_DATABASE);
  }

  urlFor = (database: string): string => this.make(this.port())(database);

  postmasterPid = (): number | null => postmasterPid(this.pgDir);

  onUnexpectedExit = (listener: ExitListener): void => void this.exitListeners.push(listener);

  /**
   * Becomes the supervisor (the lock is held): adopts the postmaster running on the data
   * directory, or starts one when `start` (at start-up), or reports the cluster down to the
   * listeners (a take-over finding it down: the supervisor restarts it with its backoff).
   */
  async supervise(how: 'start' | 'take-over'): Promise<void> {
    if (this.stopped) return;
    this.supervising = true;
    process.on('exit', this.onProcessExit);
    this.handleSignals();
    const pid = postmasterPid(this.pgDir);
    const port = runningPort(this.pgDir);
    if (pid && port) {
      this.lastPort = port;
      this.watch(adopted(pid, port));
      this.log.info({ pid, port, dir: this.pgDir, how }, 'supervising the embedded postgres already running (adopted)');
      if (how === 'start') await ensureDatabaseOrExplain(this.urlFor('postgres'));
      return;
    }
    if (how === 'start') {
      await this.startPostmaster();
      await ensureDatabaseOrExplain(this.urlFor('postgres'));
      this.log.info({ port: this.pm!.port, dir: this.pgDir }, 'embedded postgres started');
      return;
    }
    this.log.error({ dir: this.pgDir }, 'took over supervision of the embedded postgres and found it down');
    for (const l of this.exitListeners) l({ code: null, signal: null });
  }

  /** Starts the server again on the same data (its last port when free); rejects like a start. */
  restart = async (): Promise<void> => {
    if (this.stopped || !this.supervising) return; // shutting down, or another process supervises
    await this.startPostmaster();
    if (!this.stopped) this.log.info({ port: this.pm!.port, dir: this.pgDir }, 'embedded postgres restarted');
  };

  private async startPostmaster(): Promise<void> {
    this.prepared ??= prepareCluster(this.dataDir, this.pgDir, this.password, this.log);
    let prepared: Prepared;
    try {
      prepared = await this.prepared;
    } catch (err) {
      this.prepared = null; // try again next time
      throw err;
    }
    const adminUrl = (port: number) => this.make(port)('postgres');
    this.starting = startServer(prepared.bin, this.pgDir, adminUrl, prepared.who, this.log, this.pm?.port ?? this.lastPort);
    try {
      const next = await this.starting;
      if (this.stopped) {
        next.child.kill('SIGINT');
        await next.exited;
        return;
      }
      this.lastPort = next.port;
      this.watch(ownChild(next));
    } finally {
      this.starting = null;
    }
  }

  private watch(pm: Postmaster): void {
    this.pm = pm;
    void pm.exited.then(() => {
      if (this.stopped || this.pm !== pm) return;
      this.log.error({ dir: this.pgDir, pid: pm.pid }, 'embedded postgres exited unexpectedly');
      for (const l of this.exitListeners) l({ code: null, signal: null });
    });
  }

  /** A program without its own signal handling (the CLI, a script) stops the cluster on Ctrl-C/SIGTERM. */
  private handleSignals(): void {
    for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
      if (process.listenerCount(signal) > 0) continue;
      const handler = () => void this.stop().finally(() => process.exit(code));
      process.once(signal, handler);
      this.signalHandlers.push([signal, handler]);
    }
  }

  stop = async (): Promise<void> => {
    if (this.stopped) return;
    this.stopped = true;
    await this.starting?.catch(() => undefined);
    process.off('exit', this.onProcessExit);
    for (const [signal, handler] of this.signalHandlers) process.off(signal, handler);
    if (this.supervising && this.pm) {
      await this.pm.stop();
      this.log.info('embedded postgres stopped');
    }
    this.lock.release();
  };
}
