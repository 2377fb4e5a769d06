/**
 * What the metrics cost on the hot path (docs/operations.md, "Metrics"; docs/performance.md):
 * `GET /me` and the calls page, served by two API processes on the same cluster that differ only
 * in METRICS_ENABLED, measured in the same run in short alternating slices (on, off, off, on, …),
 * so drift on a shared machine hits both alike. Two figures per route:
 * - throughput: the median over the rounds of (req/s with metrics / req/s without), each round's
 *   two sides measured back to back; cost = 1 − that ratio; target < 3 %;
 * - Node CPU per request of each process (user + system from /proc), which other programs on the
 *   machine disturb less than throughput: cost = CPU with / CPU without − 1.
 *
 * Hooked into bench/run.ts (BENCH_ONLY section `metrics`); runs the compiled service (dist/), as
 * `npm run start:api` does. Knobs: BENCH_METRICS_ROUNDS (8 rounds of on, off, off, on per route),
 * BENCH_METRICS_SLICE (seconds per slice, 1).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';
import { projectRoot } from '../src/db/migrate.js';
import { treeCpuMs } from './proc.js';
import type { BenchRow } from './common.js';

export interface MetricsBenchContext {
  dataDir: string;
  /** Slug of the seeded location and a token of it with every scope. */
  slug: string;
  token: string;
  seconds: number;
  connections: number;
  progress(msg: string): void;
}

interface Api {
  child: ChildProcess;
  base: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startApi(ctx: MetricsBenchContext, port: number, metrics: boolean): Promise<Api> {
  const child = spawn(process.execPath, ['--max-semi-space-size=8', '--heap-growing-percent=30', path.join(projectRoot, 'dist', 'src', 'main.js'), 'api'], {
    cwd: projectRoot,
    stdio: 'ignore',
    env: {
      PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: ctx.dataDir, HOST: '127.0.0.1',
      PORT: String(port), ADMIN_PORT: String(port + 1), RATE_LIMIT_PER_MINUTE: '1000000000',
      METRICS_ENABLED: String(metrics), LOG_LEVEL: 'info',
    },
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`API (METRICS_ENABLED=${metrics}) exited with ${child.exitCode}`);
    if (await fetch(`${base}/readyz`).then((r) => r.status === 200, () => false)) return { child, base };
    if (i > 600) throw new Error('API did not become ready');
    await sleep(200);
  }
}

interface Slice {
  requests: number;
  rps: number;
  cpuMs: number;
}

/** One slice of load on one API process: its requests, rate and the Node CPU it spent. */
async function slice(api: Api, route: string, token: string, seconds: number, connections: number): Promise<Slice> {
  const cpu0 = treeCpuMs(api.child.pid!);
  const r = await autocannon({ url: api.base + route, headers: { authorization: `Bearer ${token}` }, connections, duration: seconds });
  if (r.non2xx + r.errors) throw new Error(`${route}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { requests: r.requests.total, rps: r.requests.total / seconds, cpuMs: treeCpuMs(api.child.pid!) - cpu0 };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

export async function runMetricsBench(ctx: MetricsBenchContext): Promise<BenchRow[]> {
  const rounds = Number(process.env.BENCH_METRICS_ROUNDS ?? 8);
  const sliceS = Number(process.env.BENCH_METRICS_SLICE ?? 1);
  const port = 41000 + Math.floor(Math.random() * 10000);
  const on = await startApi(ctx, port, true);
  const off = await startApi(ctx, port + 2, false);
  const rows: BenchRow[] = [];
  try {
    const targets: [string, string][] = [['GET /me', '/api/v1/me'], ['GET calls (page of 50)', `/api/v1/locations/${ctx.slug}/calls`]];
    for (const [name, route] of targets) {
      ctx.progress(`metrics cost, ${name}: ${rounds} × (on, off, off, on) × ${sliceS} s, c=${ctx.connections}`);
      // Warm-up of both (JIT, plan caches, pool connections), not counted.
      await slice(on, route, ctx.token, 2, ctx.connections);
      await slice(off, route, ctx.token, 2, ctx.connections);
      const ratios: number[] = [];
      const tot = { on: { req: 0, cpu: 0, rps: 0 }, off: { req: 0, cpu: 0, rps: 0 } };
      for (let i = 0; i < rounds; i++) {
        const a1 = await slice(on, route, ctx.token, sliceS, ctx.connections);
        const b1 = await slice(off, route, ctx.token, sliceS, ctx.connections);
        const b2 = await slice(off, route, ctx.token, sliceS, ctx.connections);
        const a2 = await slice(on, route, ctx.token, sliceS, ctx.connections);
        ratios.push((a1.rps + a2.rps) / (b1.rps + b2.rps));
        for (const [side, xs] of [['on', [a1, a2]], ['off', [b1, b2]]] as const) {
          for (const x of xs) {
            tot[side].req += x.requests;
            tot[side].cpu += x.cpuMs;
            tot[side].rps += x.rps / (2 * rounds);
          }
        }
      }
      const ratio = median(ratios);
      const cpuOn = tot.on.cpu / tot.on.req;
      const cpuOff = tot.off.cpu / tot.off.req;
      rows.push({
        name: `metrics cost on ${name} (req/s, metrics on vs METRICS_ENABLED=false)`, value: tot.on.rps, unit: 'req/s',
        baseline: tot.off.rps, ratio, target: '< 3 % cost (ratio ≥ 97 %)',
        note: `cost ${((1 - ratio) * 100).toFixed(1)} % (median of ${rounds} rounds; rounds ranged ${(Math.min(...ratios) * 100).toFixed(0)}–${(Math.max(...ratios) * 100).toFixed(0)} %)`,
      });
      rows.push({
        name: `metrics cost on ${name} (Node CPU per request)`, value: cpuOn * 1000, unit: 'µs', baseline: cpuOff * 1000,
        ratio: cpuOff / cpuOn, target: '< 3 % more CPU',
        note: `cost ${((cpuOn / cpuOff - 1) * 100).toFixed(1)} % over ${tot.on.req + tot.off.req} requests`,
      });
    }
    // The scrape itself, once the counters hold the load's series: its size and time (median of 5).
    const times: number[] = [];
    let text = '';
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      text = await (await fetch(`http://127.0.0.1:${port + 1}/metrics`)).text();
      times.push(performance.now() - t);
    }
    rows.push({ name: 'one /metrics scrape of the API (after the load, median of 5)', value: median(times), unit: 'ms',
      note: `${text.split('\n').filter((l) => l && !l.startsWith('#')).length} samples, ${(text.length / 1024).toFixed(0)} KiB; queue gauges from one SQL call` });
  } finally {
    for (const api of [on, off]) {
      api.child.kill('SIGTERM');
      await new Promise((r) => api.child.once('exit', r));
    }
  }
  return rows;
}
