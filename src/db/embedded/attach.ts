/**
 * A cluster already running on the data directory, seen through the postmaster.pid PostgreSQL
 * writes: its pid and port, and waiting until it accepts connections.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import type { UrlMaker } from './cluster.js';
import { EmbeddedPostgresError } from './errors.js';
import { CONNECT_PROBE_MS, ensureDatabaseOrExplain, probe, READY_TIMEOUT_MS } from './server.js';

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
 * How long a running cluster may take connections without answering any before attaching gives
 * up: a starting server answers at once ("starting up"), so silence means its processes are
 * stopped (docs/operations.md, "A database that does not answer").
 */
export const ATTACH_SILENCE_MS = 10_000;

/**
 * Waits until the cluster running on `pgDir` accepts connections (its supervisor may be starting
 * it) and has the application database; rejects when it still refuses after READY_TIMEOUT_MS, or
 * has answered nothing for ATTACH_SILENCE_MS (an EmbeddedPostgresError with code ETIMEDOUT).
 */
export async function awaitConnections(pgDir: string, make: UrlMaker, log: Logger): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let silentSince: number | null = null;
  for (;;) {
    const port = runningPort(pgDir);
    const answer = port ? await probe(make(port)('postgres')) : 'refuses';
    if (answer === 'accepts') {
      await ensureDatabaseOrExplain(make(port!)('postgres'));
      log.debug({ port }, 'attached to running embedded postgres');
      return;
    }
    if (answer === 'silent') silentSince ??= Date.now() - CONNECT_PROBE_MS;
    else silentSince = null;
    if (silentSince !== null && Date.now() - silentSince >= ATTACH_SILENCE_MS) {
      throw new EmbeddedPostgresError(`the server running on ${pgDir} (port ${port}) takes connections but has answered none for ${ATTACH_SILENCE_MS / 1000} s`,
        `see whether its processes are stopped (its pid is the first line of ${path.join(pgDir, 'postmaster.pid')}; \`ps -o stat= -p <pid>\` shows T), and try again`, 'ETIMEDOUT');
    }
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(`found a server running on ${pgDir} (port ${port ?? 'unknown'}) that refuses connections`,
        `stop that server (its pid is the first line of ${path.join(pgDir, 'postmaster.pid')}) and start again`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
