/**
 * Delivery engine bench (`npm run bench:delivery`, or `runDeliveryBench()` from another bench):
 * everything in one run on a throwaway embedded cluster, with a worker process started as an
 * operator would (`src/main.ts worker`) and a local HTTPS receiver (keep-alive, answers at once)
 * in this process. Figures (docs/delivery-engine.md explains the design they measure):
 *
 * - graphile-worker's no-op jobs/s at the engine's concurrency (WEBHOOK_CONCURRENCY), the ceiling;
 * - drain rate of 3,000 queued deliveries, spread over 150 endpoints of 30 locations: one endpoint
 *   is capped at WEBHOOK_ENDPOINT_CONCURRENCY (2) attempts in flight by design, so a single
 *   endpoint's rate is bounded by 2 / its response time, not by the engine;
 * - event → receipt p50/p99 at a paced 100 events/s;
 * - the same paced load's p50/p99 while another location's endpoint never answers (1,000 queued);
 *   a single endpoint's own rate is capped at about 2 / (its response time + ~10 ms) by design;
 * - an emergency SMS's event → receipt latency under a 10,000-delivery webhook backlog, and how
 *   much of the backlog had been delivered by then; then that backlog's drain rate;
 * - the worker process's RSS (current and peak);
 * - crash re-send: a worker killed -9 mid-attempt, time until the attempt is sent again by another
 *   worker (lease WEBHOOK_TIMEOUT_MS + 30 s, then the minutely sweeper). BENCH_CRASH=0 skips it.
 *
 * The machine is shared; absolute numbers are noisy, ratios within one run are what compare.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../src/config.js';
import { resolveDatabase } from '../src/db/connection.js';
import { migrateDatabase } from '../src/db/migrate.js';
import { createOwnerPool } from '../src/db/pools.js';
import { createLogger } from '../src/log.js';
import { makePki } from '../test/support/https.js';
import type { BenchRow } from './common.js';
import {
  cpuMeter, delivered, emitBurst, emitPaced, endpoint, location, noopCeiling, percentile, Receiver, rssOf, spawnWorker,
  stopWorker, until, ENDPOINTS_PER_LOCATION, LOCATIONS, SMS, type CpuSpent, type WorkerProc,
} from './delivery-support.js';

export interface DeliveryBenchOptions {
  /** Deliveries queued for the drain figure (default 3000). */
  drain?: number;
  /** Events per second and seconds of the paced figure (default 100/s for 10 s). */
  pacedRate?: number;
  pacedSeconds?: number;
  /** Deliveries queued for the black-holed endpoint (default 1000). */
  blackholeQueued?: number;
  /** Webhook deliveries queued ahead of the emergency (default 10000). */
  backlog?: number;
  /** Measure crash re-send (default true unless BENCH_CRASH=0; takes 40–100 s). */
  crash?: boolean;
  /** Progress lines (default: stderr). */
  progress?: (line: string) => void;
}

export async function runDeliveryBench(opts: DeliveryBenchOptions = {}): Promise<BenchRow[]> {
  const say = opts.progress ?? ((l: string) => process.stderr.write(`${l}\n`));
  const drainN = opts.drain ?? 3000;
  const pacedRate = opts.pacedRate ?? 100;
  const pacedSeconds = opts.pacedSeconds ?? 10;
  const blackholeN = opts.blackholeQueued ?? 1000;
  const backlogN = opts.backlog ?? 10000;
  const crash = opts.crash ?? process.env.BENCH_CRASH !== '0';
  const rows: BenchRow[] = [];

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-bench-delivery-'));
  const log = createLogger('warn', 2);
  const cfg = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
  const db = await resolveDatabase(cfg, log);
  const pki = makePki();
  const rx = new Receiver();
  let worker: WorkerProc | null = null;
  const pool = createOwnerPool(db.url, 6, 'bench');
  try {
    // Committed migrations plus migrations/current.sql: the bench measures the working tree.
    await migrateDatabase(db.url, log, { includeCurrent: true });
    await rx.start(pki);
    const workerEnv = {
      DATABASE_URL: db.url, NODE_EXTRA_CA_CERTS: pki.caFile, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', LOG_LEVEL: 'info',
      SMS_API_URL: rx.url('/sms'), ...SMS,
      ...Object.fromEntries(['WEBHOOK_CONCURRENCY', 'WEBHOOK_ENDPOINT_CONCURRENCY', 'NOTIFY_CONCURRENCY', 'WEBHOOK_TIMEOUT_MS']
        .filter((k) => process.env[k]).map((k) => [k, process.env[k]!])),
    };
    const concurrency = loadConfig(workerEnv).WEBHOOK_CONCURRENCY;

    // 30 locations × 5 endpoints (lead.created: drain and backlog) + one call.ended endpoint each (paced).
    const locs: string[] = [];
    for (let i = 0; i < LOCATIONS; i++) {
      const loc = await location(pool, `Bench Location ${i}`);
      locs.push(loc);
      for (let j = 0; j < ENDPOINTS_PER_LOCATION; j++) await endpoint(pool, loc, rx.url(`/ok/drain/${i}/${j}`), ['lead.created']);
      await endpoint(pool, loc, rx.url(`/ok/paced/${i}`), ['call.ended']);
    }
    await pool.query('analyze');
    worker = await spawnWorker(workerEnv);
    const workerPid = worker.child.pid!;

    // Warm-up (connections, JIT): a few deliveries everywhere.
    rx.ok = [];
    await emitBurst(pool, locs, 'lead.created', 2);
    await until('warm-up', () => rx.ok.length >= LOCATIONS * ENDPOINTS_PER_LOCATION * 2, 60_000);
    await until('warm-up recorded', async () => (await delivered(pool, locs)) >= LOCATIONS * ENDPOINTS_PER_LOCATION * 2, 60_000, 20);

    // The ceiling (graphile-worker's own no-op jobs at the same concurrency, with the worker's
    // settings) and the drain, interleaved over three rounds on this shared machine; the best
    // round of each is reported, and the CPU each costs per job or delivery (less noisy).
    const perLoc = Math.ceil(drainN / (LOCATIONS * ENDPOINTS_PER_LOCATION));
    const drainTotal = perLoc * LOCATIONS * ENDPOINTS_PER_LOCATION;
    const noops: Array<{ rate: number; cpuPerJob: { self: number; pg: number } }> = [];
    const drains: Array<{ rate: number; recorded: number; cpu: { worker: number; pg: number; receiver: number } }> = [];
    for (let round = 1; round <= 3; round++) {
      say(`round ${round}/3: no-op ceiling (graphile-worker, concurrency ${concurrency}), then drain of ${drainTotal} deliveries over ${LOCATIONS * ENDPOINTS_PER_LOCATION} endpoints…`);
      const n = await noopCeiling(db.url, dataDir, concurrency, 4000);
      noops.push({ rate: n.rate, cpuPerJob: { self: (n.cpu.self * 1000) / 4000, pg: (n.cpu.pg * 1000) / 4000 } });
      rx.ok = [];
      const before = await delivered(pool, locs);
      // From the commit of the events (their fan-out is ingestion's cost, not delivery's).
      let start = 0;
      let meter: () => CpuSpent = () => ({ self: 0, worker: 0, pg: 0 });
      await emitBurst(pool, locs, 'lead.created', perLoc, () => {
        meter = cpuMeter(dataDir, workerPid);
        start = Date.now();
      });
      await until('drain received', () => rx.ok.length >= drainTotal, 300_000);
      const received = drainTotal / ((rx.ok[drainTotal - 1].at - start) / 1000);
      await until('drain recorded', async () => (await delivered(pool, locs)) >= before + drainTotal, 120_000, 20);
      const recorded = drainTotal / ((Date.now() - start) / 1000);
      const cpu = meter();
      drains.push({ rate: received, recorded, cpu: { worker: (cpu.worker * 1000) / drainTotal, pg: (cpu.pg * 1000) / drainTotal, receiver: (cpu.self * 1000) / drainTotal } });
    }
    const noop = Math.max(...noops.map((x) => x.rate));
    const best = drains.reduce((a, b) => (b.rate > a.rate ? b : a));
    const bestNoop = noops.reduce((a, b) => (b.rate > a.rate ? b : a));
    const rounds = (xs: number[]) => xs.map((x) => Math.round(x)).join('/');
    rows.push({ name: `graphile-worker no-op jobs (concurrency ${concurrency}), best of 3 [${rounds(noops.map((x) => x.rate))}]`, value: Math.round(noop), unit: 'jobs/s' });
    rows.push({ name: `drain ${drainTotal} deliveries (${LOCATIONS * ENDPOINTS_PER_LOCATION} endpoints, ${LOCATIONS} locations), received, best of 3 [${rounds(drains.map((x) => x.rate))}]`, value: Math.round(best.rate), unit: 'deliveries/s', baseline: Math.round(noop), ratio: best.rate / noop });
    rows.push({ name: `drain ${drainTotal} deliveries, received and recorded, best of 3`, value: Math.round(Math.max(...drains.map((x) => x.recorded))), unit: 'deliveries/s', baseline: Math.round(noop), ratio: Math.max(...drains.map((x) => x.recorded)) / noop });
    const noopCpu = bestNoop.cpuPerJob.self + bestNoop.cpuPerJob.pg;
    rows.push({ name: 'CPU per no-op job: graphile-worker process + postgres', value: Math.round(noopCpu), unit: 'µs' });
    rows.push({ name: `CPU per delivery: worker ${Math.round(best.cpu.worker)} + postgres ${Math.round(best.cpu.pg)} (receiver ${Math.round(best.cpu.receiver)} not counted)`, value: Math.round(best.cpu.worker + best.cpu.pg), unit: 'µs', baseline: Math.round(noopCpu), ratio: (best.cpu.worker + best.cpu.pg) / noopCpu });

    // Paced.
    say(`paced: ${pacedRate} events/s for ${pacedSeconds} s…`);
    rx.ok = [];
    const pacedN = await emitPaced(pool, locs, 'call.ended', pacedRate, pacedSeconds);
    await until('paced received', () => rx.ok.length >= pacedN, 120_000);
    const paced = rx.ok.map((r) => r.at - r.createdAt).sort((a, b) => a - b);
    const pacedP99 = percentile(paced, 99);
    rows.push({ name: `event → receipt p50 at ${pacedRate} events/s`, value: percentile(paced, 50), unit: 'ms' });
    rows.push({ name: `event → receipt p99 at ${pacedRate} events/s`, value: pacedP99, unit: 'ms' });

    // Black hole beside healthy locations: the same paced load as above while another location's
    // endpoint never answers with its backlog queued ahead (one endpoint is capped at 2 attempts in
    // flight, so the healthy load is spread over the 30 locations as in the paced figure).
    say(`black hole: ${blackholeN} queued for an endpoint that never answers, healthy locations paced at ${pacedRate} events/s…`);
    const bh = await location(pool, 'Bench Black Hole');
    const bhEndpoint = await endpoint(pool, bh, rx.url('/blackhole'), ['call.ended']);
    await emitBurst(pool, [bh], 'call.ended', blackholeN);
    await until('black hole in flight', () => rx.blackholeOpen >= 1, 30_000);
    rx.ok = [];
    const healthyN = await emitPaced(pool, locs, 'call.ended', pacedRate, pacedSeconds);
    await until('healthy received', () => rx.ok.length >= healthyN, 120_000);
    const beside = rx.ok.map((r) => r.at - r.createdAt).sort((a, b) => a - b);
    const { rows: [{ unsent }] } = await pool.query(
      `select count(*)::int as unsent from app.webhook_deliveries where endpoint_id = $1 and status = 'pending' and attempted_at is null`, [bhEndpoint]);
    rows.push({ name: `healthy locations p50 beside a black-holed endpoint (${pacedRate} events/s)`, value: percentile(beside, 50), unit: 'ms' });
    rows.push({ name: `healthy locations p99 beside a black-holed endpoint (${blackholeN} queued, ${unsent} still unsent)`, value: percentile(beside, 99), unit: 'ms', baseline: pacedP99, ratio: percentile(beside, 99) / pacedP99 });
    await pool.query(`delete from app.webhook_deliveries where endpoint_id = $1 and status = 'pending'`, [bhEndpoint]);
    await pool.query(`delete from app.webhook_endpoints where id = $1`, [bhEndpoint]);

    // Emergency under a webhook backlog.
    const backlogPerLoc = Math.ceil(backlogN / (LOCATIONS * ENDPOINTS_PER_LOCATION));
    const backlogTotal = backlogPerLoc * LOCATIONS * ENDPOINTS_PER_LOCATION;
    say(`emergency under a ${backlogTotal}-delivery webhook backlog…`);
    const em = await location(pool, 'Bench Emergency HVAC', { owner_cell: '+12125550100' });
    await pool.query(`update app.notification_settings set routes = routes || '{"call.emergency": ["sms"]}' where location_id = $1`, [em]);
    rx.ok = [];
    rx.sms = [];
    const backlogBefore = await delivered(pool, locs);
    let backlogStart = 0;
    let backlogMeter: () => CpuSpent = () => ({ self: 0, worker: 0, pg: 0 });
    await emitBurst(pool, locs, 'lead.created', backlogPerLoc, () => {
      backlogMeter = cpuMeter(dataDir, workerPid);
      backlogStart = Date.now();
    });
    const { rows: [{ event_id: emergencyEvent }] } = await pool.query(
      `with c as (
         insert into app.calls (location_id, platform_call_id, caller_phone, caller_name, outcome, urgency_level, is_emergency,
                                started_at, ended_at, duration_sec, service_type, issue_summary, platform_status, finalized_at, emergency_fired_at)
         values ($1, 'bench_' || gen_random_uuid(), '+12125550142', 'Dana Whitfield', 'lead', 5, true, now() - interval '2 minutes', now(), 120,
                 'furnace repair', 'No heat, smells of gas', 'analyzed', now(), now())
         returning *)
       select app.emit($1, 'call.emergency', app.call_summary_json(c) || jsonb_build_object('reason', 'urgency', 'lead_id', null)) as event_id
         from c`, [em]);
    const { rows: [{ created }] } = await pool.query('select created_at as created from app.events where id = $1', [emergencyEvent]);
    await until('emergency SMS', () => rx.sms.length >= 1, 60_000);
    const smsLatency = rx.sms[0].at - (created as Date).getTime();
    const backlogAtSms = rx.ok.filter((r) => r.at <= rx.sms[0].at).length;
    rows.push({ name: `emergency SMS event → receipt under a ${backlogTotal}-delivery webhook backlog`, value: smsLatency, unit: 'ms' });
    rows.push({ name: 'backlog deliveries received before that SMS', value: backlogAtSms, unit: `of ${backlogTotal}` });
    await until('backlog received', () => rx.ok.length >= backlogTotal, 600_000);
    const backlogRate = backlogTotal / ((rx.ok[backlogTotal - 1].at - backlogStart) / 1000);
    const backlogCpu = backlogMeter();
    rows.push({ name: `drain ${backlogTotal} deliveries (the backlog), received`, value: Math.round(backlogRate), unit: 'deliveries/s', baseline: Math.round(noop), ratio: backlogRate / noop });
    rows.push({ name: `CPU per backlog delivery: worker ${Math.round((backlogCpu.worker * 1000) / backlogTotal)} + postgres ${Math.round((backlogCpu.pg * 1000) / backlogTotal)} (receiver ${Math.round((backlogCpu.self * 1000) / backlogTotal)})`, value: Math.round(((backlogCpu.worker + backlogCpu.pg) * 1000) / backlogTotal), unit: 'µs', baseline: Math.round(noopCpu), ratio: (backlogCpu.worker + backlogCpu.pg) / backlogTotal * 1000 / noopCpu });
    await until('backlog recorded', async () => (await delivered(pool, locs)) >= backlogBefore + backlogTotal, 120_000, 50);

    const mem = rssOf(worker.child.pid!);
    if (mem) {
      rows.push({ name: 'worker process RSS after the runs', value: Math.round(mem.rss), unit: 'MB' });
      rows.push({ name: 'worker process peak RSS', value: Math.round(mem.peak), unit: 'MB' });
    }

    if (crash) {
      say('crash re-send: kill -9 a worker mid-attempt, another worker re-sends (lease + minutely sweeper; up to ~100 s)…');
      await stopWorker(worker);
      const victim = await spawnWorker(workerEnv);
      const cr = await location(pool, 'Bench Crash');
      await endpoint(pool, cr, rx.url('/crash'), ['spam.blocked']);
      await pool.query(`select app.emit($1, 'spam.blocked', '{"bench": true}'::jsonb)`, [cr]);
      await until('attempt in flight at the victim', () => rx.crash.length >= 1, 60_000);
      victim.child.kill('SIGKILL');
      const killedAt = Date.now();
      await victim.exited;
      worker = await spawnWorker(workerEnv);
      await until('re-sent', () => rx.crash.length >= 2, 240_000, 50);
      rows.push({ name: 'crash re-send (kill -9 mid-attempt → sent again)', value: Math.round((rx.crash[1] - killedAt) / 100) / 10, unit: 's' });
    }
    const warnings = worker.output().split('\n').filter((l) => /"level":(40|50|60)/.test(l));
    if (warnings.length) say(`worker warnings (${warnings.length}, last 5):\n${warnings.slice(-5).join('\n')}`);
    return rows;
  } catch (err) {
    if (worker) say(`worker output (tail):\n${worker.output().slice(-4000)}`);
    throw err;
  } finally {
    if (worker) await stopWorker(worker).catch(() => undefined);
    await pool.end().catch(() => undefined);
    await rx.close().catch(() => undefined);
    await db.stop().catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(pki.dir, { recursive: true, force: true });
  }
}

/** Prints rows as a table (figure, unit, baseline, ratio). */
export function printRows(rows: BenchRow[], out: (line: string) => void = console.log): void {
  const w = Math.max(...rows.map((r) => r.name.length), 10);
  out(`\n${'figure'.padEnd(w)} ${'value'.padStart(9)} ${'unit'.padEnd(13)} ${'baseline'.padStart(9)} ${'ratio'.padStart(7)}`);
  for (const r of rows) {
    out(`${r.name.padEnd(w)} ${String(r.value).padStart(9)} ${r.unit.padEnd(13)} ${(r.baseline ?? '').toString().padStart(9)} ${(r.ratio === undefined ? '' : r.ratio.toFixed(2)).padStart(7)}`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const rows = await runDeliveryBench();
  printRows(rows);
  process.exit(0);
}
