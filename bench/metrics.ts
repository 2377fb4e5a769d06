/**
 * What the metrics cost on the hot path (docs/operations.md, "Metrics"; docs/performance.md):
 * `GET /me` and the calls page, served by two API processes on the same cluster that differ only
 * in METRICS_ENABLED, measured in the same run in alternating halves (on, off, off, on, … so drift
 * on a shared machine hits both alike). Cost = 1 − (req/s with metrics / req/s without); the
 * target is < 3 %.
 *
 * Hooked into bench/run.ts (BENCH_ONLY section `metrics`); runs the compiled service (dist/), as
 * `npm run start:api` does. Knobs: BENCH_METRICS_ROUNDS (3 on/off pairs per route).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';
import { projectRoot } from '../src/db/migrate.js';
import type { BenchRow } from './run.js';

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

async function rps(url: string, token: string, seconds: number, connections: number): Promise<number> {
  const r = await autocannon({ url, headers: { authorization: `Bearer ${token}` }, connections, duration: seconds });
  if (r.non2xx + r.errors) throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return r.requests.total / seconds;
}

export async function runMetricsBench(ctx: MetricsBenchContext): Promise<BenchRow[]> {
  const rounds = Number(process.env.BENCH_METRICS_ROUNDS ?? 3);
  const port = 41000 + Math.floor(Math.random() * 10000);
  const on = await startApi(ctx, port, true);
  const off = await startApi(ctx, port + 2, false);
  const rows: BenchRow[] = [];
  try {
    const targets: [string, string][] = [['GET /me', '/api/v1/me'], ['GET calls (page of 50)', `/api/v1/locations/${ctx.slug}/calls`]];
    const half = Math.max(1, ctx.seconds / 2);
    for (const [name, route] of targets) {
      ctx.progress(`metrics cost, ${name}: ${rounds} × (on, off, off, on) × ${half} s, c=${ctx.connections}`);
      // Warm-up of both (JIT, plan caches, pool connections), not counted.
      await rps(on.base + route, ctx.token, 1, ctx.connections);
      await rps(off.base + route, ctx.token, 1, ctx.connections);
      let withM = 0;
      let without = 0;
      for (let i = 0; i < rounds; i++) {
        withM += await rps(on.base + route, ctx.token, half, ctx.connections);
        without += await rps(off.base + route, ctx.token, half, ctx.connections);
        without += await rps(off.base + route, ctx.token, half, ctx.connections);
        withM += await rps(on.base + route, ctx.token, half, ctx.connections);
      }
      withM /= 2 * rounds;
      without /= 2 * rounds;
      const cost = 1 - withM / without;
      rows.push({
        name: `metrics cost on ${name} (req/s with metrics vs METRICS_ENABLED=false)`, value: withM, unit: 'req/s',
        baseline: without, ratio: withM / without, target: '< 3 % cost (ratio ≥ 97 %)',
        note: `cost ${(cost * 100).toFixed(1)} %; ${rounds * 2} alternating halves of ${half} s each side; two API processes on one cluster`,
      });
    }
    // The scrape itself, once the counters hold the load's series: its size and time.
    const t = performance.now();
    const text = await (await fetch(`http://127.0.0.1:${port + 1}/metrics`)).text();
    rows.push({ name: 'one /metrics scrape of the API (after the load)', value: performance.now() - t, unit: 'ms',
      note: `${text.split('\n').filter((l) => l && !l.startsWith('#')).length} samples, ${(text.length / 1024).toFixed(0)} KiB` });
  } finally {
    for (const api of [on, off]) {
      api.child.kill('SIGTERM');
      await new Promise((r) => api.child.once('exit', r));
    }
  }
  return rows;
}
