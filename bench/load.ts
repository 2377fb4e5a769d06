/** Load and process helpers of the bench: autocannon runs, sequential timings, child processes and their RSS. */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import autocannon from 'autocannon';
import { projectRoot } from '../src/db/migrate.js';
import { SECONDS } from './common.js';
import { childrenOf } from './proc.js';

// Process-tree RSS (Linux /proc).

export function treeRss(root: number): { total: number; parts: { pid: number; cmd: string; mb: number }[] } {
  const parts: { pid: number; cmd: string; mb: number }[] = [];
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop()!;
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).slice(0, 3).join(' ');
      parts.push({ pid, cmd: cmd.replace(projectRoot + '/', ''), mb: kb / 1024 });
    } catch {
      continue;
    }
    todo.push(...childrenOf(pid));
  }
  return { total: parts.reduce((s, p) => s + p.mb, 0), parts };
}

// ---------------------------------------------------------------------------------------------
// Load helpers.

export interface Load {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  requests: number;
}

export async function cannon(opts: autocannon.Options): Promise<Load> {
  const r = await autocannon({ ...opts });
  return {
    rps: r.requests.total / (opts.duration as number),
    p50: r.latency.p50,
    p99: r.latency.p99,
    bad: r.non2xx + r.errors + r.timeouts,
    requests: r.requests.total,
  };
}

/** A then B then B then A, half the time each: drift on a shared machine hits both alike. */
export async function pair(a: autocannon.Options, b: autocannon.Options, seconds = SECONDS): Promise<[Load, Load]> {
  const half = Math.max(1, seconds / 2);
  // Warm-up (JIT, plan caches, pool connections), not counted.
  await cannon({ ...a, duration: 1 });
  await cannon({ ...b, duration: 1 });
  const a1 = await cannon({ ...a, duration: half });
  const b1 = await cannon({ ...b, duration: half });
  const b2 = await cannon({ ...b, duration: half });
  const a2 = await cannon({ ...a, duration: half });
  const merge = (x: Load, y: Load): Load => ({
    rps: (x.requests + y.requests) / (2 * half),
    p50: (x.p50 + y.p50) / 2,
    p99: Math.max(x.p99, y.p99),
    bad: x.bad + y.bad,
    requests: x.requests + y.requests,
  });
  return [merge(a1, a2), merge(b1, b2)];
}

/** Median wall time of `runs` sequential GETs after one warm-up, capped at `budgetMs`. */
export async function sequential(url: string, headers: Record<string, string>, runs: number, budgetMs: number): Promise<number> {
  const res = await fetch(url, { headers });
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  const times: number[] = [];
  const until = Date.now() + budgetMs;
  for (let i = 0; i < runs && (i < 3 || Date.now() < until); i++) {
    const s = performance.now();
    const r = await fetch(url, { headers });
    await r.arrayBuffer();
    times.push(performance.now() - s);
  }
  times.sort((x, y) => x - y);
  return times[Math.floor(times.length / 2)];
}

/** One request that must succeed (2xx), or answer exactly `status` when given (a refusal the bench measures). */
export async function probe(url: string, init: RequestInit = {}, status?: number): Promise<void> {
  const res = await fetch(url, init);
  const text = await res.text();
  if (status === undefined ? res.status >= 300 : res.status !== status) {
    throw new Error(`probe ${init.method ?? 'GET'} ${url}: ${res.status}${status === undefined ? '' : `, expected ${status}`} ${text.slice(0, 300)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Child processes.

export function waitForLine(child: ChildProcess, re: RegExp, what: string, timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not start in time:\n${buf.slice(-2000)}`)), timeoutMs);
    const onData = (d: Buffer) => {
      buf += d.toString();
      const m = re.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve(m[1] ?? m[0]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (d: Buffer) => (buf += d.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}):\n${buf.slice(-2000)}`));
    });
  });
}

export async function stopTree(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || !child.pid) return;
  const exited = new Promise((r) => child.once('exit', r));
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    return;
  }
  const killer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }, 25_000);
  await exited;
  clearTimeout(killer);
}

