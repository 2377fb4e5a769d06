/**
 * Process figures from Linux /proc for the benches: a process tree's CPU time, and the postmaster
 * of a cluster (whose backends are its children).
 */
import fs from 'node:fs';
import path from 'node:path';

/** Linux USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s. */
const CLOCK_TICKS = 100;

/** The fields of /proc/<pid>/stat after the command name (field 3, the state, is index 0). */
function statFields(pid: number): string[] {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (Number(statFields(Number(e))[1]) === pid) out.push(Number(e));
    } catch {
      /* gone */
    }
  }
  return out;
}

/**
 * CPU time (user + system, ms) of a process tree, including children that exited and were reaped
 * (their time moves into the parent's cutime/cstime): without it, a backend that ends during a
 * measurement takes its CPU with it and the difference can come out negative.
 */
export function treeCpuMs(root: number): number {
  let ms = 0;
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop()!;
    try {
      const f = statFields(pid);
      ms += ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / CLOCK_TICKS;
    } catch {
      continue;
    }
    todo.push(...childrenOf(pid));
  }
  return ms;
}

/** The postmaster of the cluster in `pgDir` (its backends are its children). */
export function postmasterPid(pgDir: string): number | null {
  try {
    return Number(fs.readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || null;
  } catch {
    return null;
  }
}

/** CPU time (ms) of the cluster in `pgDir`: the postmaster and every backend it started; 0 when it is not running. */
export function clusterCpuMs(pgDir: string): number {
  const pm = postmasterPid(pgDir);
  return pm ? treeCpuMs(pm) : 0;
}
