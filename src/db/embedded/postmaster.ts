/**
 * A postmaster the supervisor watches and stops: either its own child (started by this process)
 * or one it adopted (left running by a supervisor that died, so the child of nobody here). The
 * same three things of both: its port, when it exits, and a fast shutdown.
 */
import fs from 'node:fs';
import type { Running } from './server.js';

/** How often an adopted postmaster is looked at: it is not our child, so no exit event comes. */
export const ADOPTED_POLL_MS = 200;
/** After a fast shutdown request, how long before an immediate one. */
const SLOW_STOP_MS = 30_000;

export interface Postmaster {
  pid: number;
  port: number;
  /** Resolves when the postmaster has exited. */
  exited: Promise<void>;
  alive(): boolean;
  /** Fast shutdown (SIGINT: roll back open transactions, checkpoint, exit); SIGQUIT if that takes over 30 s. */
  stop(): Promise<void>;
}

/** A process that exists and is not a zombie (an adopted postmaster may wait for a reaper). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform !== 'linux'; // no /proc: trust kill(0)
  }
}

async function stopWith(pm: Postmaster, signal: (s: NodeJS.Signals) => void): Promise<void> {
  if (!pm.alive()) return;
  signal('SIGINT');
  const slow = setTimeout(() => signal('SIGQUIT'), SLOW_STOP_MS);
  await pm.exited;
  clearTimeout(slow);
}

/** The postmaster this process started (src/db/embedded/server.ts). */
export function ownChild(running: Running): Postmaster {
  const { child } = running;
  const pm: Postmaster = {
    pid: child.pid!,
    port: running.port,
    exited: running.exited,
    alive: () => child.exitCode === null && child.signalCode === null,
    stop: () => stopWith(pm, (s) => child.kill(s)),
  };
  return pm;
}

/** A postmaster found running on the data directory, watched by polling its pid. */
export function adopted(pid: number, port: number): Postmaster {
  let timer: NodeJS.Timeout | undefined;
  const exited = new Promise<void>((resolve) => {
    const look = () => {
      if (!processAlive(pid)) return resolve();
      timer = setTimeout(look, ADOPTED_POLL_MS);
      timer.unref();
    };
    look();
  });
  const pm: Postmaster = {
    pid,
    port,
    exited,
    alive: () => processAlive(pid),
    stop: () => stopWith(pm, (s) => {
      try {
        process.kill(pid, s);
      } catch {
        /* gone */
      }
    }),
  };
  void exited.then(() => clearTimeout(timer));
  return pm;
}
