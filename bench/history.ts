/**
 * The delivery drain after a realistic history (`BENCH_ONLY=history npm run bench`; runs only when
 * named). One process tree and one database, the service as an operator runs it (API + worker, its
 * worker connections at WORKER_DB_NICE on the embedded cluster), in this order:
 *
 *  1. 30 locations × 5 endpoints (lead.created) + one call.ended endpoint each, on the bench's
 *     HTTPS receiver; graphile-worker's no-op jobs/s (the reference), then the drain of
 *     BENCH_HISTORY_DRAIN (9,000) deliveries over the 150 endpoints on the young database;
 *  2. the history: BENCH_HISTORY_CALLS (50,000) demo calls seeded into a location of their own;
 *     reads of its calls page and insights (BENCH_SECONDS each); a burst of
 *     BENCH_HISTORY_BURST (2,000) signed post-calls with full fan-out (two endpoints on every
 *     event, Slack, SMS, e-mail) by BENCH_SENDERS senders; 100 events/s paced for 10 s; an
 *     endpoint that never answers with 1,000 attempts queued, the paced load again beside it,
 *     then that endpoint paused (its attempts stay pending, held);
 *  3. the same drain again, the no-op rate again (and once at the worker's CPU priority);
 *  4. `demo seed --calls BENCH_HISTORY_SEED` (1,000,000; 0 skips it) into a second location through
 *     the CLI, as an operator runs it, timed in all and its last step alone.
 *
 * BENCH_HISTORY_HOG=1 runs the whole scenario beside a CPU-bound neighbour: a process hashing in a
 * loop at normal priority (one per BENCH_HISTORY_HOG, e.g. 2 for two).
 * BENCH_HISTORY_BURST_LOCATIONS=n spreads the burst over n locations (the ingestion location and
 * n − 1 more, each with the same fan-out, ten calls to each in turn): with one, the issue's
 * scenario, its deliveries queue behind two endpoints at their per-endpoint cap; with more, the
 * same calls and deliveries meet the cap n times over, as a peak across many contractors does.
 * BENCH_HISTORY_HOLD_WEBHOOKS=1 holds every webhook claim while the burst is ingested (the bench
 * takes the lock the claims serialise on, app.webhook_claim_batch's advisory lock, and lets it go
 * when the last post-call is answered): the ingestion with none of its deliveries beside it, to
 * tell the call's own cost from the delivery's share of the machine. A measurement, not a setting.
 *
 * Every rate is reported against the same run's no-op rate. The burst's CPU (the service's process
 * tree and the cluster) is counted twice: a call over the ingestion, and a delivery or notification
 * over the tail after it, until the fan-out is done. Evidence (stderr, and the file
 * BENCH_HISTORY_EXPLAIN when set): the claim probed before and after the history
 * (bench/history-evidence.ts: auto_explain with ANALYZE and BUFFERS of every statement inside
 * app.webhook_claim_batch), the queue tables' counters, and pg_stat_statements over the drain when
 * the cluster preloads it (a kept BENCH_DATA_DIR with `shared_preload_libraries`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { defaultSeedJobs } from '../src/cli/demo-seed.js';
import { loadConfig } from '../src/config.js';
import { num, progress, SECONDS, SENDERS, SERVICE_PHONE, type BenchContext, type BenchRow } from './common.js';
import {
  type CpuSpent, cpuMeter, emitBurst, emitPaced, endpoint, location, noopCeiling, percentile, until, ENDPOINTS_PER_LOCATION, LOCATIONS,
} from './delivery-support.js';
import { claimIndexKb, formatStats, probeClaim, type ClaimProbe, statementsReset, statementsTop, tableStats, walMeter } from './history-evidence.js';
import { postCallBodies } from './ingest.js';
import { cannon, probe } from './load.js';

const HISTORY_CALLS = num('BENCH_HISTORY_CALLS', 50_000);
const BURST = num('BENCH_HISTORY_BURST', 2_000);
const DRAIN = num('BENCH_HISTORY_DRAIN', 9_000);
const SEED = num('BENCH_HISTORY_SEED', 1_000_000);
const HOGS = num('BENCH_HISTORY_HOG', 0);
const HOLD_WEBHOOKS = process.env.BENCH_HISTORY_HOLD_WEBHOOKS === '1';
const BURST_LOCATIONS = Math.max(1, num('BENCH_HISTORY_BURST_LOCATIONS', 1));
// Each extra location dials +1 312 555 0301…0999 (burstLocations).
if (BURST_LOCATIONS > 699) throw new Error('BENCH_HISTORY_BURST_LOCATIONS: at most 699');
const NOOP_JOBS = 4_000;
const ALL_EVENTS = ['call.ended', 'call.emergency', 'lead.created', 'lead.updated', 'booking.created', 'booking.updated', 'spam.blocked'];

const probeLine = (p: ClaimProbe) => `${p.ms.toFixed(2)} ms, ${Math.round(p.blocks)} blocks of the delivery table and its indexes, `
  + `${p.skipScans.toFixed(1)} scans of the skip scan's index per claim of 32 (${p.leased} leased in ${p.claims + 2} claims, rolled back)`;

/** A CPU-bound neighbour: SHA-256 in a loop until killed. */
function startHog(): ChildProcess {
  return spawn(process.execPath, ['-e', `const c = require('node:crypto'); let b = Buffer.alloc(64); for (;;) b = c.createHash('sha256').update(b).digest();`],
    { stdio: 'ignore' });
}

/** Holds every webhook claim until `release()`: a transaction holding the advisory lock they serialise on. */
async function holdWebhookClaims(owner: pg.Pool): Promise<{ release(): Promise<void> }> {
  const client = await owner.connect();
  await client.query('begin');
  await client.query("select pg_advisory_xact_lock(hashtext('app.webhook_claim_batch'))");
  progress('history: webhook claims held during the ingestion (BENCH_HISTORY_HOLD_WEBHOOKS)');
  return {
    async release() {
      await client.query('commit');
      client.release();
    },
  };
}

/**
 * The burst's locations: the ingestion location and BENCH_HISTORY_BURST_LOCATIONS − 1 more, each
 * with two endpoints on every event, a Slack integration, an owner's cell (SMS) and an owner
 * member (e-mail); the numbers the calls dial, and the endpoints.
 */
async function burstLocations(ctx: BenchContext): Promise<{ ids: string[]; phones: string[]; endpoints: string[] }> {
  const out = { ids: [] as string[], phones: [] as string[], endpoints: [] as string[] };
  for (let i = 0; i < BURST_LOCATIONS; i++) {
    const slug = i === 0 ? 'ingest' : `history-burst-${i}`;
    const phone = i === 0 ? SERVICE_PHONE : `+13125550${String(300 + i).padStart(3, '0')}`;
    let id = ctx.ingest.id;
    if (i > 0) {
      const loc = await ctx.location(slug, { service_phone: phone, owner_cell: `+13125551${String(300 + i).padStart(3, '0')}` });
      id = loc.id;
      if (loc.fresh) await ctx.owner.query(`select admin.member_invite($1, $2, 'owner', 'Bench Owner')`, [slug, `owner-${i}@bench.example`]);
      else {
        // A kept cluster (BENCH_DATA_DIR): the last run's receivers are gone.
        await ctx.owner.query('delete from app.webhook_endpoints where location_id = $1', [id]);
        await ctx.owner.query('delete from app.integrations where location_id = $1', [id]);
      }
    }
    const h = { ...ctx.auth(slug), 'content-type': 'application/json' };
    for (const label of ['history-a', 'history-b']) {
      const res = await fetch(`${ctx.base}/api/v1/locations/${slug}/webhook-endpoints`, { method: 'POST', headers: h,
        body: JSON.stringify({ label, url: `${ctx.https.url}/ok/burst/${label}`, events: ALL_EVENTS }) });
      if (res.status !== 201) throw new Error(`endpoint: ${res.status} ${await res.text()}`);
      out.endpoints.push(((await res.json()) as { data: { id: string } }).data.id);
    }
    const slack = await ctx.owner.query(`select 1 from app.integrations where location_id = $1 and provider = 'slack'`, [id]);
    if (!slack.rowCount) await probe(`${ctx.base}/api/v1/locations/${slug}/integrations`, { method: 'POST', headers: h,
      body: JSON.stringify({ provider: 'slack', webhook_url: `${ctx.https.url}/slack`, label: 'history' }) });
    out.ids.push(id);
    out.phones.push(phone);
  }
  return out;
}

/** `demo seed --calls n` through the CLI (dist/), as an operator runs it: seconds in all and for its last step. */
async function seedThroughCli(databaseUrl: string, slug: string, n: number): Promise<{ total: number; finish: number }> {
  const root = path.resolve(import.meta.dirname, '..');
  const started = Date.now();
  let finishAt = 0;
  await new Promise<void>((resolve, reject) => {
    const cli = spawn(process.execPath, ['dist/src/cli/index.js', 'demo', 'seed', '--location', slug, '--calls', String(n)],
      { cwd: root, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: databaseUrl }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    cli.stderr.on('data', (c: Buffer) => {
      err = (err + c.toString()).slice(-4000);
      if (!finishAt && err.includes('finishing')) finishAt = Date.now();
    });
    cli.on('error', reject);
    cli.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`demo seed exited ${code}: ${err}`))));
  });
  const end = Date.now();
  return { total: (end - started) / 1000, finish: (end - (finishAt || end)) / 1000 };
}

export async function runHistoryBench(ctx: BenchContext): Promise<BenchRow[]> {
  const hogs = Array.from({ length: HOGS }, startHog);
  try {
    return await historyScenario(ctx);
  } finally {
    for (const h of hogs) h.kill('SIGKILL');
  }
}

async function historyScenario(ctx: BenchContext): Promise<BenchRow[]> {
  const { owner, base, https, dataDir, servicePid } = ctx;
  const rows: BenchRow[] = [];
  const evidence: string[] = [];
  const note = (s: string) => {
    evidence.push(s);
    progress(s);
  };
  // The service's settings (the bench passes them through to it): the no-op runs at the same.
  const { WEBHOOK_CONCURRENCY: concurrency, WORKER_DB_NICE: workerNice } = loadConfig({
    DATA_DIR: dataDir, WEBHOOK_CONCURRENCY: process.env.WEBHOOK_CONCURRENCY, WORKER_DB_NICE: process.env.WORKER_DB_NICE,
  });
  const rate = (n: number, ms: number) => n / (ms / 1000);

  // ---- 1. Endpoints, warm-up, the no-op reference and the drain on a young database ------------
  const locs: string[] = [];
  for (let i = 0; i < LOCATIONS; i++) {
    const loc = await location(owner, `History Location ${i}`);
    locs.push(loc);
    for (let j = 0; j < ENDPOINTS_PER_LOCATION; j++) await endpoint(owner, loc, `${https.url}/ok/drain/${i}/${j}`, ['lead.created']);
    await endpoint(owner, loc, `${https.url}/ok/paced/${i}`, ['call.ended']);
  }
  const warm = https.watch('/ok/drain/');
  await emitBurst(owner, locs, 'lead.created', 2);
  await until('warm-up', () => warm.length >= LOCATIONS * ENDPOINTS_PER_LOCATION * 2, 120_000, 20);

  const perLoc = Math.ceil(DRAIN / (LOCATIONS * ENDPOINTS_PER_LOCATION));
  const drainN = perLoc * LOCATIONS * ENDPOINTS_PER_LOCATION;
  /** Pending attempts of active endpoints and pending notifications: the fan-out still being worked off. */
  const settled = async () => Number((await owner.query(
    `select (select count(*) from app.webhook_deliveries d join app.webhook_endpoints e on e.id = d.endpoint_id
              where d.status = 'pending' and e.active and d.next_attempt_at <= now())
          + (select count(*) from app.notifications where status = 'pending' and next_attempt_at <= now()) as n`)).rows[0].n) === 0;
  async function drain(label: string): Promise<{ rate: number; cpuUs: number; split: string }> {
    await until(`${label}: queues settled`, settled, 600_000, 200);
    const got = https.watch('/ok/drain/');
    let start = 0;
    let meter = () => ({ self: 0, worker: 0, pg: 0 });
    const wal = await walMeter(owner);
    await emitBurst(owner, locs, 'lead.created', perLoc, () => {
      meter = cpuMeter(dataDir, servicePid);
      start = Date.now();
    });
    await until(`${label}: drain received`, () => got.length >= drainN, 900_000, 10);
    const r = rate(drainN, got[drainN - 1].at - start);
    const cpu = meter();
    progress(`${label}: ${drainN} deliveries at ${r.toFixed(0)}/s; ${await wal()}`);
    const us = (ms: number) => Math.round((ms * 1000) / drainN);
    return { rate: r, cpuUs: ((cpu.worker + cpu.pg) * 1000) / drainN, split: `service ${us(cpu.worker)} + postgres ${us(cpu.pg)} + bench (receiver) ${us(cpu.self)} µs` };
  }
  /** The no-op rate: the median of three runs (one run of a few seconds varied by up to 2× between neighbours). */
  async function noop(label: string, nice = 0) {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await noopCeiling(ctx.databaseUrl, dataDir, concurrency, NOOP_JOBS, nice));
    runs.sort((a, b) => a.rate - b.rate);
    const n = runs[1];
    progress(`no-op ${label}: ${n.rate.toFixed(0)} jobs/s (median of ${runs.map((r) => r.rate.toFixed(0)).join(', ')})`);
    return { rate: n.rate, cpuUs: ((n.cpu.self + n.cpu.pg) * 1000) / NOOP_JOBS };
  }

  progress(`history: no-op reference and a ${drainN}-delivery drain over ${LOCATIONS * ENDPOINTS_PER_LOCATION} endpoints, young database`);
  const noop1 = await noop('before the history');
  const young = await drain('drain on the young database');
  const probeYoung = await probeClaim(owner, locs, 'lead.created', perLoc);
  note(`claim probe, young database: ${probeLine(probeYoung)}`);
  note(formatStats('queue tables, young database:', await tableStats(owner)));

  // ---- 2. The history ------------------------------------------------------------------------------
  await ctx.location('history', {});
  progress(`history: seeding ${HISTORY_CALLS.toLocaleString('en')} calls`);
  await ctx.seed('history', HISTORY_CALLS, 30);

  progress(`history: reads (calls page, insights), ${SECONDS} s each`);
  for (const p of ['/calls', '/insights?days=30']) {
    const url = `${base}/api/v1/locations/history${p}`;
    await probe(url, { headers: ctx.auth('history') });
    await cannon({ url, headers: ctx.auth('history'), connections: 10, duration: SECONDS });
  }

  // The burst: signed post-calls, two endpoints on every event, Slack, SMS and e-mail at each of
  // its locations.
  const burst = await burstLocations(ctx);
  const bodies = postCallBodies(burst.phones);
  const finalised = async () => Number((await owner.query(
    'select count(*) n from app.calls where location_id = any ($1::uuid[]) and finalized_at is not null', [burst.ids])).rows[0].n);
  const before = await finalised();
  const burstGot = https.watch('/ok/burst/');
  progress(`history: burst of ${BURST} post-calls to ${burst.ids.length} location(s), ${SENDERS} senders`);
  const claimsHeld = HOLD_WEBHOOKS ? await holdWebhookClaims(owner) : null;
  const burstMeter = cpuMeter(dataDir, servicePid);
  // The ingestion ends with the burst's last answer. autocannon resolves a run of `amount`
  // requests only at its next one-second sample after that, so its resolution would round every
  // ingestion time up to whole seconds (and count the worker's CPU of that second as the calls').
  let answered = 0;
  let ended: { at: number; cpu: CpuSpent; released?: Promise<void> } | null = null;
  const endIngestion = () => {
    if (!ended) ended = { at: Date.now(), cpu: burstMeter(), released: claimsHeld?.release() };
    return ended;
  };
  const burstStart = Date.now();
  const ac = await autocannon({
    url: `${base}/api/voice/post-call`, connections: SENDERS, amount: BURST,
    requests: [{ method: 'POST', setupRequest: (req) => {
      const body = bodies.next();
      return { ...req, body, headers: bodies.headers(body) };
    }, onResponse: () => {
      if (++answered === BURST) endIngestion();
    } }],
  }).catch(async (err: unknown) => {
    await (ended ? ended.released : claimsHeld?.release());
    throw err;
  });
  // A request that failed without an answer leaves the count short: then autocannon's end stands.
  const { at: burstEnd, cpu: cpuIngested, released } = endIngestion();
  await released;
  const tailStatements = await statementsReset(owner);
  const ingested = (await finalised()) - before;
  const { rows: [{ n: burstDeliveries }] } = await owner.query(
    'select count(*)::int as n from app.webhook_deliveries where endpoint_id = any ($1::uuid[]) and attempt = 1', [burst.endpoints]);
  await until('burst deliveries received', () => burstGot.length >= burstDeliveries, 900_000, 50);
  // What the fan-out left after the ingestion costs, until every delivery and notification is done.
  await until('burst fan-out settled', settled, 900_000, 50);
  const cpuSettled = burstMeter();
  const settledAt = Date.now();
  if (tailStatements) note(`pg_stat_statements over the burst's tail:\n${await statementsTop(owner, 20)}`);
  const { rows: [{ n: tailNotifications }] } = await owner.query(
    `select count(*)::int as n from app.notification_log where location_id = any ($1::uuid[]) and status in ('sent', 'failed') and at > to_timestamp($2 / 1000.0)`,
    [burst.ids, burstEnd]);
  const receivedDuringIngestion = burstGot.filter((r) => r.at <= burstEnd).length;
  const tailItems = burstGot.length - receivedDuringIngestion + tailNotifications;
  const lags = burstGot.map((r) => r.at - r.createdAt).sort((a, b) => a - b);
  const lastAt = Math.max(...burstGot.map((r) => r.at));
  const ingestRate = rate(ingested, burstEnd - burstStart);
  progress(`burst: ${ingested} calls in ${((burstEnd - burstStart) / 1000).toFixed(1)} s, ${burstDeliveries} deliveries, last ${((lastAt - burstStart) / 1000).toFixed(1)} s after the start`);
  // Where the tail comes from: events created and deliveries received per 5 s from the start.
  const windows = (ts: number[]) => {
    const out = Array.from({ length: Math.ceil((lastAt - burstStart + 1) / 5000) }, () => 0);
    for (const t of ts) out[Math.max(0, Math.floor((t - burstStart) / 5000))]++;
    return out.join(' ');
  };
  note(`burst per 5 s from its start: events created ${windows(burstGot.map((r) => r.createdAt))} · deliveries received ${windows(burstGot.map((r) => r.at))}`);

  progress('history: paced 100 events/s for 10 s');
  const paced = https.watch('/ok/paced/');
  const pacedN = await emitPaced(owner, locs, 'call.ended', 100, 10);
  await until('paced received', () => paced.length >= pacedN, 300_000, 20);
  const pacedLags = paced.map((r) => r.at - r.createdAt).sort((a, b) => a - b);

  progress('history: black-holed endpoint, 1,000 queued, paced load beside it, then paused');
  const bhLoc = (await ctx.location('history-blackhole', {})).id;
  const bhEp = await endpoint(owner, bhLoc, `${https.url}/blackhole`, ['call.ended']);
  await emitBurst(owner, [bhLoc], 'call.ended', 1_000);
  await until('black hole in flight', () => https.blackholeOpen() >= 1, 60_000, 20);
  const beside = https.watch('/ok/paced/');
  const besideN = await emitPaced(owner, locs, 'call.ended', 100, 10);
  await until('beside received', () => beside.length >= besideN, 300_000, 20);
  const besideLags = beside.map((r) => r.at - r.createdAt).sort((a, b) => a - b);
  await probe(`${base}/api/v1/locations/history-blackhole/webhook-endpoints/${bhEp}`, { method: 'PATCH',
    headers: { ...ctx.auth('history-blackhole'), 'content-type': 'application/json' }, body: JSON.stringify({ active: false }) });
  const { rows: [{ held }] } = await owner.query(
    `select count(*)::int as held from app.webhook_deliveries where endpoint_id = $1 and status = 'pending'`, [bhEp]);

  // ---- 3. The drain after the history ------------------------------------------------------------
  await until('after the history: queues settled', settled, 600_000, 200);
  const probeOld = await probeClaim(owner, locs, 'lead.created', perLoc);
  note(`claim probe, after the history: ${probeLine(probeOld)}`);
  note(formatStats('queue tables, after the history (before its drain):', await tableStats(owner)));
  note(`claim indexes (kB): ${JSON.stringify(await claimIndexKb(owner))}`);
  const statements = await statementsReset(owner);
  const old = await drain('drain after the history');
  if (statements) note(`pg_stat_statements over the drain after the history:\n${await statementsTop(owner)}`);
  note(formatStats('queue tables, after its drain:', await tableStats(owner)));
  const noop2 = await noop('after the history');
  const noopNice = workerNice ? await noop(`at the worker's nice ${workerNice}`, workerNice) : null;
  // ---- 4. A large demo seed into a second location, after all that ------------------------------
  let seed: { total: number; finish: number } | null = null;
  if (SEED > 0) {
    await ctx.location('history-seed', {});
    progress(`history: demo seed --calls ${SEED.toLocaleString('en')} into a second location (the CLI)`);
    seed = await seedThroughCli(ctx.databaseUrl, 'history-seed', SEED);
    progress(`demo seed: ${seed.total.toFixed(0)} s in all, its last step ${seed.finish.toFixed(0)} s`);
  }
  if (process.env.BENCH_HISTORY_EXPLAIN) {
    fs.writeFileSync(process.env.BENCH_HISTORY_EXPLAIN, `${evidence.join('\n\n')}\n\n==== claim, young database ====\n${probeYoung.plans}\n\n`
      + `==== claim, after the history ====\n${probeOld.plans}\n`);
    progress(`evidence and claim plans written to ${process.env.BENCH_HISTORY_EXPLAIN}`);
  }

  // ---- Rows -------------------------------------------------------------------------------------------
  const ref = Math.max(noop1.rate, noop2.rate);
  const refCpu = Math.min(noop1.cpuUs, noop2.cpuUs);
  const eps = `${LOCATIONS * ENDPOINTS_PER_LOCATION} endpoints`;
  rows.push({ name: `history: graphile-worker no-op jobs (concurrency ${concurrency}), best of before/after`, value: Math.round(ref), unit: 'jobs/s',
    note: `${Math.round(noop1.rate)} before, ${Math.round(noop2.rate)} after the history${noopNice ? `; ${Math.round(noopNice.rate)} with its connections at nice ${workerNice} as the worker's` : ''}` });
  rows.push({ name: `history: drain ${drainN} deliveries (${eps}), young database`, value: Math.round(young.rate), unit: 'deliveries/s',
    baseline: Math.round(ref), ratio: young.rate / ref, note: `CPU ${Math.round(young.cpuUs)} µs a delivery (${young.split}); no-op ${Math.round(refCpu)} µs a job` });
  rows.push({ name: `history: drain ${drainN} deliveries (${eps}) after the history`, value: Math.round(old.rate), unit: 'deliveries/s',
    baseline: Math.round(ref), ratio: old.rate / ref, target: '≥ 70 % of no-op',
    note: `CPU ${Math.round(old.cpuUs)} µs a delivery (${old.split}); ${held} attempts held by the paused endpoint${noopNice ? `; ${Math.round((old.rate / noopNice.rate) * 100)} % of the no-op at nice ${workerNice}` : ''}` });
  rows.push({ name: `history: claim of 32 at the drain's start: blocks of the delivery table and its indexes`, value: probeOld.blocks, unit: 'blocks',
    baseline: probeYoung.blocks, ratio: probeYoung.blocks / probeOld.blocks,
    note: `skip scans a claim ${probeOld.skipScans.toFixed(1)} (young ${probeYoung.skipScans.toFixed(1)}); ${probeOld.ms.toFixed(1)} ms (young ${probeYoung.ms.toFixed(1)}); baseline: the young database` });
  const over = BURST_LOCATIONS > 1 ? ` over ${BURST_LOCATIONS} locations` : '';
  rows.push({ name: `history: ingestion burst of ${BURST} post-calls${over}, full fan-out`, value: ingestRate, unit: 'calls/s', baseline: Math.round(ref),
    ratio: ingestRate / ref, target: '≥ 0.18 × no-op', note: `${ingested} finalised in ${((burstEnd - burstStart) / 1000).toFixed(1)} s; ${ac.non2xx + ac.errors} failed; p99 ${ac.latency.p99} ms` });
  rows.push({ name: `history: event → receipt during the burst, p50`, value: percentile(lags, 50), unit: 'ms', target: '≤ 3 s',
    note: `p99 ${Math.round(percentile(lags, 99))} ms over ${burstDeliveries} deliveries` });
  rows.push({ name: 'history: event → receipt during the burst, p99', value: percentile(lags, 99), unit: 'ms' });
  rows.push({ name: 'history: last burst delivery ÷ ingestion time', value: (lastAt - burstStart) / (burstEnd - burstStart), unit: '×', target: '≤ 1.5 ×',
    note: `last delivery ${((lastAt - burstStart) / 1000).toFixed(1)} s after the burst started; ingestion ${((burstEnd - burstStart) / 1000).toFixed(1)} s` });
  const perCall = (ms: number) => (ms / ingested).toFixed(2);
  const tail = { worker: cpuSettled.worker - cpuIngested.worker, pg: cpuSettled.pg - cpuIngested.pg };
  const perItem = (ms: number) => Math.round((ms * 1000) / Math.max(1, tailItems));
  rows.push({ name: 'history: CPU a call during the burst\'s ingestion (service + postgres)', value: (cpuIngested.worker + cpuIngested.pg) / ingested, unit: 'ms',
    note: `service ${perCall(cpuIngested.worker)} + postgres ${perCall(cpuIngested.pg)} ms (bench ${perCall(cpuIngested.self)} ms); `
      + `${receivedDuringIngestion} of the burst's deliveries received meanwhile` });
  rows.push({ name: 'history: CPU a delivery or notification of the burst\'s tail (service + postgres)', value: perItem(tail.worker + tail.pg), unit: 'µs',
    note: `service ${perItem(tail.worker)} + postgres ${perItem(tail.pg)} µs over ${tailItems} webhook deliveries and notifications sent after the ingestion, `
      + `in ${((settledAt - burstEnd) / 1000).toFixed(1)} s; the drain after the history: ${Math.round(old.cpuUs)} µs a delivery` });
  rows.push({ name: 'history: event → receipt at 100 events/s, p50 / p99', value: percentile(pacedLags, 50), unit: 'ms', note: `p99 ${percentile(pacedLags, 99)} ms` });
  rows.push({ name: 'history: the same beside a black-holed endpoint (1,000 queued), p99', value: percentile(besideLags, 99), unit: 'ms', target: '< 1 s',
    note: `p50 ${percentile(besideLags, 50)} ms` });
  if (seed) rows.push({ name: `history: demo seed --calls ${SEED.toLocaleString('en')} into a second location, after the history`, value: seed.total, unit: 's',
    target: '< 180 s', note: `${defaultSeedJobs()} batches at a time (the default --jobs); its last step (each resource's demo rows, the counts) ${seed.finish.toFixed(0)} s` });
  if (HOGS) rows.push({ name: 'history: beside a CPU-bound neighbour', value: HOGS, unit: 'processes hashing', note: 'every figure above was taken with them running' });
  return rows;
}
