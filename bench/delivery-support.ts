/**
 * The pieces of the delivery-engine bench (bench/delivery.ts): a counting HTTPS receiver, the
 * worker process, CPU and RSS meters, and events emitted in bursts or paced.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Logger as WorkerLogger, run } from 'graphile-worker';
import type pg from 'pg';
import { lowerPoolPriority } from '../src/db/backend-priority.js';
import { projectRoot } from '../src/db/migrate.js';
import { callFn, createOwnerPool } from '../src/db/pools.js';
import { createLogger } from '../src/log.js';
import type { TestPki } from '../test/support/https.js';
import { clusterCpuMs, postmasterPid, treeCpuMs } from './proc.js';

export const LOCATIONS = 30;
export const ENDPOINTS_PER_LOCATION = 5;
export const SMS = { SMS_ACCOUNT_SID: 'AC_bench', SMS_AUTH_TOKEN: 'bench_token', SMS_FROM: '+15005550006' };

export interface Receipt {
  at: number;
  createdAt: number;
}

/** The local HTTPS receiver: answers /ok/* at once, never answers /blackhole/*, holds the first /crash. */
export class Receiver {
  server!: Server;
  port = 0;
  ok: Receipt[] = [];
  sms: Receipt[] = [];
  crash: number[] = [];
  blackholeOpen = 0;
  private held: ServerResponse[] = [];

  async start(pki: TestPki): Promise<void> {
    this.server = createServer({ key: pki.key, cert: pki.cert, keepAlive: true }, (req, res) => this.handle(req, res));
    this.server.keepAliveTimeout = 5000;
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  url(p: string): string {
    return `https://127.0.0.1:${this.port}${p}`;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const url = req.url ?? '';
      if (url.startsWith('/blackhole')) {
        this.blackholeOpen += 1;
        res.on('close', () => (this.blackholeOpen -= 1));
        return;
      }
      if (url.startsWith('/sms')) {
        this.sms.push({ at, createdAt: at });
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end('{"sid":"SM_bench","status":"queued"}');
        return;
      }
      if (url.startsWith('/crash')) {
        this.crash.push(at);
        if (this.crash.length === 1) {
          this.held.push(res);
          return;
        }
        res.writeHead(200);
        res.end('ok');
        return;
      }
      let createdAt = at;
      try {
        createdAt = Date.parse((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { created_at: string }).created_at);
      } catch {
        /* not an event body */
      }
      this.ok.push({ at, createdAt });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  }

  async close(): Promise<void> {
    for (const r of this.held) r.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

export interface WorkerProc {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

export async function spawnWorker(env: Record<string, string>): Promise<WorkerProc> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'worker'], {
    cwd: projectRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', WORKER_ADMIN_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const deadline = Date.now() + 90_000;
  while (!/worker started/.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`worker did not start:\n${out}`);
    await sleep(100);
  }
  return { child, output: () => out, exited };
}

export async function stopWorker(w: WorkerProc, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (w.child.exitCode !== null) return;
  w.child.kill(signal);
  await w.exited;
}

/** VmRSS and VmHWM (peak) of a process, in MB (Linux /proc). */
export function rssOf(pid: number): { rss: number; peak: number } | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

export interface CpuSpent {
  /** This process (the no-op runner, or the receiver and the bench's own polling). */
  self: number;
  worker: number;
  pg: number;
}

/** Starts counting CPU (ms) of this process, the worker process and the cluster; call to read. */
export function cpuMeter(dataDir: string, workerPid?: number): () => CpuSpent {
  const self0 = process.cpuUsage();
  const w0 = workerPid ? treeCpuMs(workerPid) : 0;
  const pg0 = clusterCpuMs(path.join(dataDir, 'pg'));
  return () => {
    const self1 = process.cpuUsage(self0);
    return {
      self: (self1.user + self1.system) / 1000,
      worker: workerPid ? treeCpuMs(workerPid) - w0 : 0,
      pg: clusterCpuMs(path.join(dataDir, 'pg')) - pg0,
    };
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until(what: string, fn: () => boolean | Promise<boolean>, timeoutMs: number, stepMs = 5): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`bench: timed out waiting for ${what}`);
    await sleep(stepMs);
  }
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Events of one type for several locations, in one transaction (so they are queued at once). */
export async function emitBurst(pool: pg.Pool, locations: string[], type: string, perLocation: number, beforeCommit?: () => void): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('begin');
    for (const loc of locations) {
      await c.query(`select set_config('app.location_id', $1, true)`, [loc]);
      await c.query(`select app.emit($1, $2, jsonb_build_object('n', i, 'bench', true)) from generate_series(1, $3::int) i`, [loc, type, perLocation]);
    }
    beforeCommit?.();
    await c.query('commit');
  } catch (e) {
    await c.query('rollback');
    throw e;
  } finally {
    c.release();
  }
}

/** `rate` events per second for `seconds`, each its own transaction, round-robin over locations. */
export async function emitPaced(pool: pg.Pool, locations: string[], type: string, rate: number, seconds: number): Promise<number> {
  const n = rate * seconds;
  const start = Date.now();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - Date.now();
    if (wait > 0) await sleep(wait);
    pending.push(pool.query(`select app.emit($1, $2, '{"bench": true}'::jsonb)`, [locations[i % locations.length], type]));
  }
  await Promise.all(pending);
  return n;
}

export async function location(pool: pg.Pool, name: string, attrs: Record<string, unknown> = {}): Promise<string> {
  const slug = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${Math.random().toString(36).slice(2, 8)}`;
  return (await callFn<{ id: string }>(pool, 'admin.location_create', [{ name, slug, ...attrs }])).id;
}

export async function endpoint(pool: pg.Pool, locationId: string, url: string, events: string[]): Promise<string> {
  const { rows } = await pool.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret) values ($1, $2, $3, app.webhook_new_secret()) returning id`,
    [locationId, url, events]);
  return rows[0].id;
}

/**
 * graphile-worker running no-op jobs at `concurrency`, with the worker's own settings: jobs/s and
 * CPU spent. `nice`: its database connections at that CPU priority, as the service's worker pool
 * runs on the embedded cluster (WORKER_DB_NICE; src/db/backend-priority.ts).
 */
export async function noopCeiling(url: string, dataDir: string, concurrency: number, jobs: number, nice = 0): Promise<{ rate: number; cpu: CpuSpent }> {
  const pool = createOwnerPool(url, 12, 'bench-noop');
  if (nice) lowerPoolPriority(pool, () => postmasterPid(path.join(dataDir, 'pg')), nice, createLogger('warn', 2));
  try {
    let ran = 0;
    const runner = await run({
      pgPool: pool, concurrency, noHandleSignals: true, pollInterval: 1000, parsedCronItems: [],
      logger: new WorkerLogger(() => () => undefined),
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      taskList: { bench_noop: async () => void (ran += 1) },
    });
    await sleep(200);
    // From the commit of the jobs, as the drain is timed from the commit of its events.
    await pool.query(
      `select graphile_worker.add_jobs(array(select row('bench_noop', '{}'::json, null, null, null, null, null, null)::graphile_worker.job_spec
         from generate_series(1, $1::int)))`, [jobs]);
    const meter = cpuMeter(dataDir);
    const started = Date.now();
    // Count in memory while they run (polling the jobs table would add to the cluster's CPU), then
    // wait for the last completions to be written.
    await until('no-op jobs run', () => ran >= jobs, 120_000, 5);
    await until('no-op jobs completed', async () =>
      (await pool.query(`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'bench_noop'`)).rows[0].n === 0, 60_000, 5);
    const rate = jobs / ((Date.now() - started) / 1000);
    const cpu = meter();
    await runner.stop();
    return { rate, cpu };
  } finally {
    await pool.end();
  }
}

export async function delivered(pool: pg.Pool, locations: string[]): Promise<number> {
  const { rows } = await pool.query(
    `select count(*)::int as n from app.webhook_deliveries where location_id = any($1::uuid[]) and status = 'delivered'`, [locations]);
  return rows[0].n;
}
