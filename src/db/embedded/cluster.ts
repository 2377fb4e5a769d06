/** What a process using the embedded cluster holds: where it is now, and (as its owner) how to stop and restart it. */

export interface EmbeddedCluster {
  /**
   * Connection string of the application database (owner), read afresh each time: after a restart
   * the cluster may listen on another port (the owner's current server; an attached process reads
   * the port from `pg/postmaster.pid`, as PostgreSQL writes it).
   */
  readonly url: string;
  /** Builds a connection string for another database of the same cluster (current port). */
  urlFor(database: string): string;
  /** True while this process supervises the cluster (holds its lock; and so stops it). */
  readonly owned: boolean;
  /** Pid of the cluster's postmaster (the parent of every backend), from its postmaster.pid. */
  postmasterPid(): number | null;
  stop(): Promise<void>;
  /** Calls `listener` when the server exits without stop() (a crash, a kill -9) while this process supervises it. */
  onUnexpectedExit?(listener: (exit: { code: number | null; signal: string | null }) => void): void;
  /** Supervisor only (a no-op otherwise): starts the server again on the same data (its last port when free); rejects like a start. */
  restart?(): Promise<void>;
}

/** Builds the owner's connection string to one database of the cluster on `port`. */
export type UrlMaker = (port: number) => (database: string) => string;
