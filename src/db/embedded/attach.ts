/**
 * A cluster already running on the data directory, seen through the postmaster.pid PostgreSQL
 * writes: its pid and port, and a handle that follows it to whatever port it listens on.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import type { EmbeddedCluster, UrlMaker } from './cluster.js';
import { EmbeddedPostgresError } from './errors.js';
import { connects, EMBEDDED_DATABASE, ensureDatabaseOrExplain } from './server.js';

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

/** Attaches to the cluster running on `pgDir` (port `existing`): its owner starts, stops and restarts it. */
export async function attachTo(pgDir: string, existing: number, make: UrlMaker, log: Logger): Promise<EmbeddedCluster> {
  const urlFor = make(existing);
  if (!(await connects(urlFor('postgres')))) {
    throw new EmbeddedPostgresError(`found a server running on ${pgDir} (port ${existing}) that refuses connections`,
      `stop that server (its pid is the first line of ${path.join(pgDir, 'postmaster.pid')}) and start again`);
  }
  await ensureDatabaseOrExplain(urlFor('postgres'));
  log.debug({ port: existing }, 'attached to running embedded postgres');
  // The owner may restart the cluster on another port: each new connection reads where it is
  // now (postmaster.pid of a live postmaster), or dials the last known port while it is down.
  let port = existing;
  const current = () => (port = runningPort(pgDir) ?? port);
  return {
    get url() {
      return make(current())(EMBEDDED_DATABASE);
    },
    urlFor: (db: string) => make(current())(db),
    owned: false,
    postmasterPid: () => postmasterPid(pgDir),
    stop: async () => undefined,
  };
}

