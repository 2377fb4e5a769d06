/**
 * A cluster already running on the data directory, seen through the postmaster.pid PostgreSQL
 * writes: its pid and port, and waiting until it accepts connections.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import type { UrlMaker } from './cluster.js';
import { EmbeddedPostgresError } from './errors.js';
import { connects, ensureDatabaseOrExplain, READY_TIMEOUT_MS } from './server.js';

/** Pid of the cluster running on this data directory (first line of its postmaster.pid), or null. */
export function postmasterPid(pgDir: string): number | null {
  try {
    const pid = Number(fs.readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}
/** Port of a cluster already running on this data directory, from its postmaster.pid. */
export function runningPort(pgDir: string): number | null {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  let lines: string[];
  try {
    lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!pid || !port) return null;
  try {
    process.kill(pid, 0);
    return port;
  } catch (err) {
    // Alive but another user's (the postgres system user's cluster seen by a normal user).
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? port : null;
  }
}

/**
 * Waits until the cluster running on `pgDir` accepts connections (its supervisor may be starting
 * it) and has the application database; rejects when it still refuses after READY_TIMEOUT_MS.
 */
export async function awaitConnections(pgDir: string, make: UrlMaker, log: Logger): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const port = runningPort(pgDir);
    if (port && (await connects(make(port)('postgres')))) {
      await ensureDatabaseOrExplain(make(port)('postgres'));
      log.debug({ port }, 'attached to running embedded postgres');
      return;
    }
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(`found a server running on ${pgDir} (port ${port ?? 'unknown'}) that refuses connections`,
        `stop that server (its pid is the first line of ${path.join(pgDir, 'postmaster.pid')}) and start again`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
