/**
 * Delivery yields the CPU to intake on the embedded cluster. Every PostgreSQL backend is its own
 * session (it calls setsid), so on Linux, where the scheduler shares the CPU between sessions
 * ("autogroups") before it shares it between processes, a connection of the worker weighs as much
 * as one of the API and the service's whole Node process weighs as much as one connection. When
 * the machine is saturated, the worker's claims and records then take CPU from the voice webhooks,
 * whose senders wait on the answer. The worker's connections are therefore given a lower CPU
 * weight (nice, default 10, `WORKER_DB_NICE`) when the cluster is ours: they still run, and take
 * all the CPU that intake leaves, but give way while both want it. See docs/performance.md,
 * "Intake before delivery".
 *
 * Only a backend whose parent is the embedded cluster's postmaster is touched: the check keeps a
 * pid reported by some other server (DATABASE_URL) from naming an unrelated local process.
 */
import fs from 'node:fs';
import os from 'node:os';
import type pg from 'pg';
import type { Logger } from '../log.js';

export type Outcome = 'lowered' | 'not-ours' | 'failed';

/** Parent pid of a local process, from /proc (null when there is no such process or no /proc). */
export function parentPid(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) ? ppid : null;
  } catch {
    return null;
  }
}

/**
 * Gives backend `pid` the CPU weight of `nice`: its autogroup's (the weight between sessions,
 * where the kernel has autogroups) and its own (within its session, and everywhere else).
 */
export function lowerBackendPriority(pid: number, postmasterPid: number, nice: number): Outcome {
  if (parentPid(pid) !== postmasterPid) return 'not-ours';
  try {
    if (fs.existsSync(`/proc/${pid}/autogroup`)) fs.writeFileSync(`/proc/${pid}/autogroup`, String(nice));
    os.setPriority(pid, nice);
    return 'lowered';
  } catch {
    return 'failed';
  }
}

/**
 * Lowers the priority of every backend `pool` connects from now on. Failures (another user's
 * cluster without the right to renice it, a platform without /proc) are logged once and change
 * nothing else: the connection is used as it is.
 */
export function lowerPoolPriority(pool: pg.Pool, postmasterPid: () => number | null, nice: number, log: Logger): void {
  if (nice === 0) return;
  let warned = false;
  pool.on('connect', (client) => {
    const pid = (client as unknown as { processID?: number }).processID;
    const postmaster = postmasterPid();
    const outcome = pid && postmaster ? lowerBackendPriority(pid, postmaster, nice) : 'not-ours';
    if (outcome !== 'lowered' && !warned) {
      warned = true;
      log.warn({ pid, outcome, nice }, 'could not lower the CPU priority of a worker database connection; delivery competes with intake for the CPU');
    }
  });
}
