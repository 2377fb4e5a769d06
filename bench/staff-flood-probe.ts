/**
 * Where the API's latency goes during a staff flood (bench/staff-flood.ts): over one measured
 * phase, the CPU of the service's threads (the API's event loop is the node process's main thread;
 * the staff GraphQL thread names itself `staff-graphql`), of the database backends by
 * application_name, and of the whole machine (other work included); the API process's event-loop
 * delay (prom-client's monitorEventLoopDelay histogram, reset by every /metrics scrape); and what
 * the API's backends were waiting on, sampled every 100 ms from pg_stat_activity.
 */
import fs from 'node:fs';
import type pg from 'pg';
import { childrenOf } from './proc.js';

const TICK_MS = 10; // USER_HZ 100

function cpuMs(statPath: string): number {
  try {
    const s = fs.readFileSync(statPath, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

function comm(p: string): string {
  try {
    return fs.readFileSync(p, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Nice of the staff thread as last seen (null: not found). */
let staffNice: number | null = null;
function niceOf(statPath: string): number | null {
  try {
    const st = fs.readFileSync(statPath, 'utf8');
    return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[16]);
  } catch {
    return null;
  }
}

/** The service's node processes (npm start → sh → node …). */
function nodeProcesses(root: number): number[] {
  const out: number[] = [];
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop()!;
    try {
      if (/main\.js|staff\/thread\.js/.test(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8'))) out.push(pid);
    } catch {
      /* gone */
    }
    todo.push(...childrenOf(pid));
  }
  return out;
}

/** CPU (ms) per category: the API's main thread, the staff thread, the process's other threads by name (V8Worker: GC and compiler helpers shared by every isolate). */
function serviceCpu(root: number): Record<string, number> {
  const out: Record<string, number> = { 'api main thread': 0, 'staff thread': 0 };
  for (const pid of nodeProcesses(root)) {
    let tids: string[] = [];
    try {
      tids = fs.readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    const child = /staff\/thread\.js/.test(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
    for (const tid of tids) {
      const ms = cpuMs(`/proc/${pid}/task/${tid}/stat`);
      const name = comm(`/proc/${pid}/task/${tid}/comm`);
      const key = child ? (name === 'staff-graphql' ? 'staff process main thread' : `staff process ${name || 'thread'}`)
        : Number(tid) === pid ? 'api main thread' : name === 'staff-graphql' ? 'staff thread' : `service ${name || 'thread'}`;
      if (name === 'staff-graphql') staffNice = niceOf(`/proc/${pid}/task/${tid}/stat`);
      out[key] = (out[key] ?? 0) + ms;
    }
  }
  return out;
}

function machineBusyMs(): { busy: number; total: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0) * TICK_MS;
  const idle = (f[3] + f[4]) * TICK_MS;
  return { busy: total - idle, total };
}

interface Snapshot {
  at: number;
  service: Record<string, number>;
  backends: Map<number, { app: string; ms: number }>;
  machine: { busy: number; total: number };
}

export interface PhaseBreakdown {
  /** CPU in % of one core over the phase, by category. */
  cpu: Record<string, number>;
  /** The API process's event-loop delay over the phase (ms). */
  loopLag: { p50: number; p99: number; max: number } | null;
  /** Samples of the API's active backends: by wait (or "CPU" when running), in % of samples. */
  apiWaits: Record<string, number>;
  apiActiveSamples: number;
}

async function lagOf(adminUrl: string): Promise<{ p50: number; p99: number; max: number } | null> {
  const text = await fetch(`${adminUrl}/metrics`).then((r) => r.text(), () => '');
  const v = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  const p99 = v('nodejs_eventloop_lag_p99_seconds');
  return Number.isFinite(p99) ? { p50: v('nodejs_eventloop_lag_p50_seconds'), p99, max: v('nodejs_eventloop_lag_max_seconds') } : null;
}

export async function startPhaseProbe(opts: { owner: pg.Pool; servicePid: number; adminUrl: string; clientPid?: () => number | undefined }): Promise<{ stop(): Promise<PhaseBreakdown> }> {
  const backends = async () => {
    const { rows } = await opts.owner.query<{ pid: number; app: string }>(
      `select pid, application_name as app from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()`);
    const m = new Map<number, { app: string; ms: number }>();
    for (const r of rows) m.set(r.pid, { app: r.app || 'other', ms: cpuMs(`/proc/${r.pid}/stat`) });
    return m;
  };
  const snap = async (): Promise<Snapshot> => {
    const service = serviceCpu(opts.servicePid);
    const client = opts.clientPid?.();
    if (client) service['bench flood clients'] = cpuMs(`/proc/${client}/stat`);
    return { at: Date.now(), service, backends: await backends(), machine: machineBusyMs() };
  };
  await lagOf(opts.adminUrl); // resets the histogram
  const first = await snap();
  const waits: Record<string, number> = {};
  let samples = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await opts.owner.query<{ w: string }>(
        `select coalesce(wait_event_type || ':' || wait_event, 'CPU') as w from pg_stat_activity
          where application_name = 'switchboard-api' and state = 'active'`).catch(() => ({ rows: [] as { w: string }[] }));
      for (const r of rows) {
        waits[r.w] = (waits[r.w] ?? 0) + 1;
        samples++;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    async stop() {
      sampling = false;
      await sampler;
      const loopLag = await lagOf(opts.adminUrl);
      const last = await snap();
      const span = last.at - first.at;
      const pct = (ms: number) => Math.round((ms / span) * 100);
      const cpu: Record<string, number> = {};
      for (const k of Object.keys(last.service)) cpu[k] = pct(last.service[k] - (first.service[k] ?? 0));
      const byApp: Record<string, number> = {};
      for (const [pid, b] of last.backends) byApp[b.app] = (byApp[b.app] ?? 0) + b.ms - (first.backends.get(pid)?.ms ?? 0);
      for (const [app, ms] of Object.entries(byApp)) cpu[`db ${app}`] = pct(ms);
      const m = last.machine.busy - first.machine.busy;
      cpu['machine (all processes, of 200 %)'] = Math.round((m / (last.machine.total - first.machine.total)) * 200);
      const apiWaits: Record<string, number> = {};
      for (const [k, n] of Object.entries(waits)) apiWaits[k] = Math.round((n / Math.max(1, samples)) * 100);
      return { cpu, loopLag, apiWaits, apiActiveSamples: samples };
    },
  };
}

/** One line for a bench note. */
export function describe(b: PhaseBreakdown): string {
  const cpu = Object.entries(b.cpu).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v} %`).join(', ');
  const lag = b.loopLag ? `API event-loop delay p50 ${b.loopLag.p50.toFixed(1)} / p99 ${b.loopLag.p99.toFixed(1)} / max ${b.loopLag.max.toFixed(1)} ms` : 'no loop delay';
  const waits = Object.entries(b.apiWaits).sort((a, c) => c[1] - a[1]).slice(0, 4).map(([k, v]) => `${k} ${v} %`).join(', ');
  return `CPU (of one core): ${cpu}; staff thread nice ${staffNice ?? '?'}; ${lag}; API backends active ${b.apiActiveSamples} samples: ${waits || 'none'}`;
}
