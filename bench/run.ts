/**
 * `npm run bench`: the service's hot paths against baselines measured in the same run, so the
 * ratios compare across machines. One throwaway embedded cluster; the service runs exactly as an
 * operator runs it (`npm start`, a child process tree whose RSS is measured) on the same DATA_DIR,
 * so it attaches to that cluster as its own embedded one; the baseline (bench/baseline.mjs: bare Express + pg) runs as a
 * second child process against the same database. autocannon drives both from this process.
 *
 * Rows (see docs/performance.md):
 *   - insights?days=90 on one location with 1,000,000 calls in the window (demo seeder; warm,
 *     sequential requests, median) vs the baseline's trivial query measured the same way;
 *   - insights?days=30 on 50,000 calls at c=50 vs the baseline's trivial query at c=50;
 *   - GET calls (page of 50) vs the baseline returning the same 50 rows; the same for leads;
 *   - GET /me vs the baseline's trivial query;
 *   - signed post-call ingestion (call_analyzed, a new call each, finalised in the request) with
 *     full fan-out (two webhook endpoints on a local HTTPS receiver, SMS + e-mail + Slack
 *     notifications; the worker runs) by BENCH_SENDERS concurrent senders → finalised calls/s,
 *     vs the baseline inserting each body with one INSERT;
 *   - RSS of the service's process tree (npm, its shell, node) under that load;
 *   - the emergency SMS of that load: from the ingestion transaction to the SMS sent (p99);
 *   - redaction at ingestion (bench/redaction.ts): its CPU share per ingested call, and realistic
 *     transcripts ingested with the location's redaction on vs off.
 *   - POST leads with an Idempotency-Key vs without (bench/idempotency.ts).
 *   - staff GraphQL (bench/staff.ts): GET calls p99 while staff aggregate 1,000,000 calls, and
 *     what the audit write adds to a small staff query.
 *
 * Knobs (environment): BENCH_SECONDS (8, per target; baseline and service alternate in halves),
 * BENCH_CONNECTIONS (50), BENCH_BIG_CALLS (1000000), BENCH_MID_CALLS (50000), BENCH_SENDERS (20),
 * BENCH_INGEST_SECONDS (15), BENCH_WARMUP_SECONDS (3: the same load before the measured one, then
 * ANALYZE), BENCH_DRAIN_SECONDS (60: wait for the fan-out backlog, RSS sampled),
 * BENCH_ONLY (comma list of sections: lists, insights, ingest, privacy, idempotency, metrics,
 * staff, staff-flood, redaction, delivery, integrations), BENCH_REDACTION_SECONDS (10, each of redaction on and off), BENCH_DATA_DIR (keep and reuse
 * the seeded cluster there instead of a throwaway one), BENCH_JSON (also write the rows there),
 * BENCH_NODE_OPTIONS (NODE_OPTIONS for the service, to try V8 flags), BENCH_START_SCRIPT (npm
 * script that starts the service, default start; start:api leaves the worker out), WORKER_DB_NICE
 * (passed to the service).
 * Progress goes to stderr; the table to stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { verify } from 'retell-sdk';
import { SMTPServer } from 'smtp-server';
import { startEmbedded } from '../src/db/embedded.js';
import { migrateDatabase, projectRoot } from '../src/db/migrate.js';
import { hashToken } from '../src/auth/tokens.js';
import { createLogger } from '../src/log.js';
import { makePki } from '../test/support/https.js';
import { childrenOf, clusterCpuMs, treeCpuMs } from './proc.js';

/** One printed row. Other bench modules (bench/delivery.ts) return rows of the same shape. */
export interface BenchRow {
  name: string;
  value: number;
  unit: string;
  /** The same measurement on the baseline, in the same unit. */
  baseline?: number;
  /** value / baseline (or baseline / value for "lower is better" units such as ms and MB). */
  ratio?: number;
  /** What the issue asks for, as text. */
  target?: string;
  note?: string;
}

const env = process.env;
const num = (k: string, d: number) => (env[k] ? Number(env[k]) : d);
const SECONDS = num('BENCH_SECONDS', 8);
const CONNECTIONS = num('BENCH_CONNECTIONS', 50);
const BIG_CALLS = num('BENCH_BIG_CALLS', 1_000_000);
const MID_CALLS = num('BENCH_MID_CALLS', 50_000);
const SENDERS = num('BENCH_SENDERS', 20);
const INGEST_SECONDS = num('BENCH_INGEST_SECONDS', 15);
const WARMUP_SECONDS = num('BENCH_WARMUP_SECONDS', 3);
const DRAIN_SECONDS = num('BENCH_DRAIN_SECONDS', 60);
const ONLY = new Set((env.BENCH_ONLY ?? 'lists,insights,ingest,privacy,idempotency').split(',').map((s) => s.trim()));
const VOICE_SECRET = 'bench_voice_secret';
const SERVICE_PHONE = '+13125550100';

const t0 = Date.now();
const progress = (msg: string) => process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Process-tree RSS (Linux /proc).

function treeRss(root: number): { total: number; parts: { pid: number; cmd: string; mb: number }[] } {
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

interface Load {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  requests: number;
}

async function cannon(opts: autocannon.Options): Promise<Load> {
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
async function pair(a: autocannon.Options, b: autocannon.Options, seconds = SECONDS): Promise<[Load, Load]> {
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
async function sequential(url: string, headers: Record<string, string>, runs: number, budgetMs: number): Promise<number> {
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

async function probe(url: string, init: RequestInit = {}): Promise<void> {
  const res = await fetch(url, init);
  const text = await res.text();
  if (res.status >= 300) throw new Error(`probe ${init.method ?? 'GET'} ${url}: ${res.status} ${text.slice(0, 300)}`);
}

// ---------------------------------------------------------------------------------------------
// Child processes.

function waitForLine(child: ChildProcess, re: RegExp, what: string, timeoutMs = 120_000): Promise<string> {
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

async function stopTree(child: ChildProcess | undefined): Promise<void> {
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

// ---------------------------------------------------------------------------------------------
// Receivers for the fan-out: a counting HTTPS server (webhooks, Slack, SMS API) and SMTP.

function startCountingHttps(pki: { key: string; cert: string }) {
  const counts = new Map<string, number>();
  const server = createHttpsServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    req.resume();
    req.on('end', () => {
      const p = (req.url ?? '/').split('?')[0];
      counts.set(p, (counts.get(p) ?? 0) + 1);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(p === '/sms' ? '{"sid":"SMbench","status":"queued"}' : '{"ok":true}');
    });
  });
  server.keepAliveTimeout = 5000;
  return new Promise<{ url: string; counts: Map<string, number>; close(): Promise<void> }>((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `https://127.0.0.1:${port}`,
        counts,
        close: async () => {
          server.closeAllConnections();
          await new Promise<void>((r) => server.close(() => r()));
        },
      });
    });
  });
}

function startCountingSmtp() {
  let messages = 0;
  const server = new SMTPServer({
    secure: false, authOptional: true, disabledCommands: ['STARTTLS', 'AUTH'], logger: false,
    onData(stream, _s, cb) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        messages++;
        cb();
      });
    },
  });
  return new Promise<{ url: string; count(): number; close(): Promise<void> }>((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.server.address() as AddressInfo;
      resolve({ url: `smtp://127.0.0.1:${port}`, count: () => messages, close: () => new Promise<void>((r) => server.close(() => r())) });
    });
  });
}

// ---------------------------------------------------------------------------------------------

const keepDir = env.BENCH_DATA_DIR ? path.resolve(env.BENCH_DATA_DIR) : null;
const dataDir = keepDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'sb-bench-'));
const log = createLogger('warn', 2);
const rows: BenchRow[] = [];
let service: ChildProcess | undefined;
let baseline: ChildProcess | undefined;
const closers: (() => Promise<void>)[] = [];

progress(`cluster in ${dataDir}`);
const cluster = await startEmbedded(dataDir, log);
const owner = new pg.Pool({ connectionString: cluster.url, max: 4 });
owner.on('error', (err) => progress(`database connection lost: ${err.message}`));
// Interrupted: take the service and the baseline down with us (they run in their own groups).
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of [service, baseline]) if (child?.pid && child.exitCode === null) try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone */ }
    process.exit(130);
  });
}
try {
  await migrateDatabase(cluster.url, log, { includeCurrent: true });

  // ---- Locations, keys, data -----------------------------------------------------------------
  const scopes: string[] = (await owner.query('select app.known_scopes() as s')).rows[0].s;
  const tokens: Record<string, string> = {};
  async function location(slug: string, attrs: Record<string, unknown>): Promise<{ id: string; fresh: boolean }> {
    const found = await owner.query('select id from app.locations where slug = $1', [slug]);
    let id: string = found.rows[0]?.id;
    if (!id) id = (await owner.query('select admin.location_create($1) ->> \'id\' as id', [{ name: slug, slug, timezone: 'America/Chicago', ...attrs }])).rows[0].id;
    const token = randomUUID();
    await owner.query('select admin.key_create($1, $2, $3, $4, $5)', [slug, `bench ${Date.now()}`, scopes, hashToken(token), token.slice(0, 8)]);
    tokens[slug] = token;
    return { id, fresh: !found.rowCount };
  }
  async function seed(slug: string, calls: number, days: number): Promise<void> {
    const have = Number((await owner.query('select count(*) n from app.calls c join app.locations l on l.id = c.location_id where l.slug = $1', [slug])).rows[0].n);
    if (have >= calls) return;
    const s = Date.now();
    await owner.query('select admin.demo_seed_prepare($1, $2)', [slug, Math.min(20_000, Math.ceil(calls * 0.2))]);
    const batch = 50_000;
    for (let done = have; done < calls; done += batch) {
      await owner.query('select admin.demo_seed_calls($1, $2, $3)', [slug, Math.min(batch, calls - done), days]);
      progress(`  ${slug}: ${Math.min(done + batch, calls).toLocaleString('en')} / ${calls.toLocaleString('en')} calls`);
    }
    await owner.query('select admin.demo_seed_finish($1)', [slug]);
    progress(`  ${slug}: seeded in ${((Date.now() - s) / 1000).toFixed(0)} s`);
  }

  const mid = await location('mid', {});
  const big = ONLY.has('insights') || ONLY.has('privacy') || ONLY.has('staff') || !env.BENCH_ONLY ? await location('big', {}) : null;
  const ingest = await location('ingest', { service_phone: SERVICE_PHONE, owner_cell: '+13125550111' });
  if (ingest.fresh) await owner.query(`select admin.member_invite('ingest', 'owner@bench.example', 'owner', 'Bench Owner')`);
  else {
    // A kept cluster (BENCH_DATA_DIR): the last run's endpoints and integration point at receivers
    // that are gone, and its backlog would be worked off during this run.
    await owner.query('delete from app.webhook_endpoints where location_id = $1', [ingest.id]);
    await owner.query('delete from app.integrations where location_id = $1', [ingest.id]);
    await owner.query('delete from graphile_worker._private_jobs');
    await owner.query(`delete from app.notifications where location_id = $1 and status = 'pending'`, [ingest.id]);
  }
  progress(`seeding (mid: ${MID_CALLS.toLocaleString('en')} calls / 30 days${big ? `, big: ${BIG_CALLS.toLocaleString('en')} calls / 90 days` : ''})`);
  await seed('mid', MID_CALLS, 30);
  if (big) await seed('big', BIG_CALLS, 90);
  await owner.query('vacuum analyze');
  await owner.query('checkpoint');

  // ---- Receivers and the two servers ---------------------------------------------------------
  const pki = makePki();
  closers.push(async () => fs.rmSync(pki.dir, { recursive: true, force: true }));
  const https = await startCountingHttps(pki);
  closers.push(https.close);
  const smtp = await startCountingSmtp();
  closers.push(smtp.close);

  const port = 20000 + Math.floor(Math.random() * 20000);
  const logFile = path.join(dataDir, `service-${Date.now()}.log`);
  const logFd = fs.openSync(logFile, 'w');
  progress(`starting the service (npm start; log in ${logFile})`);
  service = spawn('npm', ['run', '--silent', env.BENCH_START_SCRIPT ?? 'start'], {
    cwd: projectRoot,
    detached: true,
    stdio: ['ignore', logFd, logFd],
    env: {
      PATH: env.PATH, HOME: env.HOME,
      DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(port), ADMIN_PORT: String(port + 1),
      VOICE_WEBHOOK_SECRET: VOICE_SECRET, RATE_LIMIT_PER_MINUTE: '1000000000',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', NODE_EXTRA_CA_CERTS: pki.caFile,
      SMTP_URL: smtp.url, MAIL_FROM: 'bench@switchboard.example',
      SMS_API_URL: `${https.url}/sms`, SMS_ACCOUNT_SID: 'ACbench', SMS_AUTH_TOKEN: 'bench', SMS_FROM: '+13125550199',
      LOG_LEVEL: env.BENCH_LOG_LEVEL ?? 'info',
      ...(env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: env.BENCH_NODE_OPTIONS } : {}),
      ...(env.WORKER_DB_NICE ? { WORKER_DB_NICE: env.WORKER_DB_NICE } : {}),
    },
  });
  fs.closeSync(logFd);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (service.exitCode !== null) throw new Error(`service exited:\n${fs.readFileSync(logFile, 'utf8').slice(-3000)}`);
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) break;
    } catch {
      /* not yet */
    }
    if (i > 600) throw new Error('service did not become ready');
    await sleep(200);
  }
  const idleRss = treeRss(service.pid!);
  progress(`service ready; idle RSS ${idleRss.total.toFixed(0)} MB`);

  baseline = spawn(process.execPath, [path.join(projectRoot, 'bench', 'baseline.mjs')], {
    cwd: projectRoot, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: env.PATH, DATABASE_URL: cluster.url, BENCH_LOCATION_ID: mid.id },
  });
  const bport = JSON.parse(await waitForLine(baseline, /^(\{.*\})$/m, 'baseline')).port as number;
  const bbase = `http://127.0.0.1:${bport}`;

  const auth = (slug: string) => ({ authorization: `Bearer ${tokens[slug]}` });
  const get = (url: string, headers: Record<string, string> = {}): autocannon.Options => ({ url, headers, connections: CONNECTIONS });

  // ---- List reads and /me ----------------------------------------------------------------------
  if (ONLY.has('lists')) {
    const targets: [string, string, string, string][] = [
      ['GET /me', '/api/v1/me', '/one', '≥ 90 % of bare express + one trivial query'],
      ['GET calls (page of 50)', '/api/v1/locations/mid/calls', '/calls', '≥ 80 % of bare express + pg, same 50 rows'],
      ['GET leads (page of 50)', '/api/v1/locations/mid/leads', '/leads', '≥ 80 % of bare express + pg, same 50 rows'],
    ];
    for (const [name, svcPath, basePath, target] of targets) {
      await probe(base + svcPath, { headers: auth('mid') });
      await probe(bbase + basePath);
      progress(`${name}: ${SECONDS} s each, c=${CONNECTIONS}`);
      const [b, s] = await pair(get(bbase + basePath), get(base + svcPath, auth('mid')));
      rows.push({ name: `${name} req/s`, value: s.rps, unit: 'req/s', baseline: b.rps, ratio: s.rps / b.rps, target,
        note: `p99 ${s.p99} ms (baseline ${b.p99} ms)${s.bad + b.bad ? `; ${s.bad}/${b.bad} failed` : ''}` });
    }
  }

  // ---- Idempotency-Key on POST leads (bench/idempotency.ts) ----------------------------------------
  if (ONLY.has('idempotency')) {
    await location('idem', {});
    const { runIdempotencyBench } = await import('./idempotency.js');
    rows.push(...(await runIdempotencyBench({ base, token: tokens.idem, location: 'idem', seconds: SECONDS, connections: 10, progress })));
  }

  // ---- Metrics cost (bench/metrics.ts): GET /me and the calls page, metrics on vs off --------------
  if (ONLY.has('metrics') || !env.BENCH_ONLY) {
    const { runMetricsBench } = await import('./metrics.js');
    rows.push(...(await runMetricsBench({ dataDir, slug: 'mid', token: tokens.mid, seconds: SECONDS, connections: CONNECTIONS, progress })));
  }

  // ---- Insights ----------------------------------------------------------------------------------
  if (ONLY.has('insights') && big) {
    progress('insights?days=90 on 1,000,000 calls: warm, sequential');
    const trivial = await sequential(`${bbase}/one`, {}, 50, 5_000);
    const ms90 = await sequential(`${base}/api/v1/locations/big/insights?days=90`, auth('big'), 7, 30_000);
    const callsIn90 = Number((await owner.query(
      `select count(*) n from app.calls where location_id = $1 and started_at >= now() - interval '90 days'`, [big.id])).rows[0].n);
    rows.push({ name: `insights?days=90 (${(callsIn90 / 1e6).toFixed(2)} M calls) latency`, value: ms90, unit: 'ms', baseline: trivial,
      ratio: trivial / ms90, target: '< 50 ms', note: 'median of sequential warm requests; baseline: bare trivial query' });

    await probe(`${base}/api/v1/locations/mid/insights?days=30`, { headers: auth('mid') });
    progress(`insights?days=30 on ${MID_CALLS.toLocaleString('en')} calls: c=${CONNECTIONS}`);
    const [b, s] = await pair(get(`${bbase}/one`), get(`${base}/api/v1/locations/mid/insights?days=30`, auth('mid')));
    rows.push({ name: `insights?days=30 (${(MID_CALLS / 1e3).toFixed(0)} k calls) req/s`, value: s.rps, unit: 'req/s', baseline: b.rps,
      ratio: s.rps / b.rps, target: 'from the rollup (today 12 req/s, p99 4.5 s)', note: `p99 ${s.p99} ms; baseline: bare trivial query` });
  }

  // ---- Ingestion with full fan-out ---------------------------------------------------------------
  if (ONLY.has('ingest')) {
    const h = { ...auth('ingest'), 'content-type': 'application/json' };
    for (const label of ['bench-a', 'bench-b']) {
      await probe(`${base}/api/v1/locations/ingest/webhook-endpoints`, { method: 'POST', headers: h,
        body: JSON.stringify({ label, url: `${https.url}/hook/${label}`, events: ['call.ended', 'call.emergency', 'lead.created', 'lead.updated', 'booking.created', 'booking.updated', 'spam.blocked'] }) });
    }
    await probe(`${base}/api/v1/locations/ingest/integrations`, { method: 'POST', headers: h,
      body: JSON.stringify({ provider: 'slack', webhook_url: `${https.url}/slack`, label: 'bench' }) });

    // One new call per request; a mix like real traffic: leads, bookings, emergencies, other.
    const runId = randomUUID().slice(0, 8);
    let seq = 0;
    const signed = (body: string) => {
      const ts = Date.now();
      return `v=${ts},d=${createHmac('sha256', VOICE_SECRET).update(body + ts).digest('hex')}`;
    };
    const nextBody = () => {
      const n = ++seq;
      const kind = n % 10;
      const start = Date.now() - 240_000;
      const analysis: Record<string, unknown> = kind === 0
        ? { outcome: 'lead', urgency_level: 5, service_type: 'No heat', caller_name: 'Dana Bench', issue_summary: 'Furnace out' }
        : kind <= 2
          ? { outcome: 'booked', urgency_level: 2, service_type: 'AC repair', caller_name: 'Sam Bench', caller_address: '1 Oak St',
              appointment_date: new Date(Date.now() + 2 * 86400_000).toISOString().slice(0, 10), appointment_time: '10:00', estimated_value: 350 }
          : kind <= 7
            ? { outcome: 'lead', urgency_level: 3, service_type: 'Water heater', caller_name: 'Lee Bench', caller_email: `lee${n % 997}@bench.example` }
            : { outcome: 'other', urgency_level: 1 };
      return JSON.stringify({
        event: 'call_analyzed',
        call: {
          call_id: `bench_${runId}_${n}`, agent_id: 'agent_bench', direction: 'inbound',
          from_number: `+1312${String(2_000_000 + ((n * 7919) % 7_000_000)).padStart(7, '0')}`, to_number: SERVICE_PHONE,
          start_timestamp: start, end_timestamp: start + 180_000, disconnection_reason: 'agent_hangup',
          transcript: 'Agent: Thanks for calling Bench HVAC.\nUser: My system needs work.\nAgent: I can help with that.',
          call_analysis: { call_summary: 'Caller asked for service.', user_sentiment: 'Positive', custom_analysis_data: analysis },
        },
      });
    };
    const first = nextBody();
    if (!(await verify(first, VOICE_SECRET, signed(first)))) throw new Error('bench signature does not verify with retell-sdk');
    const headersFor = (body: string) => ({ 'content-type': 'application/json', 'x-retell-signature': signed(body) });
    await probe(`${base}/api/voice/post-call`, { method: 'POST', headers: headersFor(first), body: first });
    const postOpts = (url: string, duration: number): autocannon.Options => ({
      url, connections: SENDERS, duration,
      requests: [{ method: 'POST', setupRequest: (req) => {
        const body = nextBody();
        return { ...req, body, headers: headersFor(body) };
      } }],
    });

    // Baseline: the same bodies, one INSERT each.
    progress(`ingestion baseline: bare express + one INSERT, ${SENDERS} senders`);
    await cannon(postOpts(`${bbase}/insert`, 1));
    const bIns = await cannon(postOpts(`${bbase}/insert`, Math.max(2, SECONDS / 2)));

    // The service gets a warm-up too, then the ANALYZE autovacuum would run after its first pass:
    // without it the measured seconds run on plans made while the ingestion tables were empty
    // (foreign-key checks as sequential scans of a growing app.events, for one), a state a running
    // installation leaves within its first minute.
    if (WARMUP_SECONDS > 0) {
      progress(`ingestion warm-up: ${WARMUP_SECONDS} s of the same load, then ANALYZE`);
      await cannon(postOpts(`${base}/api/voice/post-call`, WARMUP_SECONDS));
      await owner.query('analyze');
    }

    const finalised = async () => Number((await owner.query(
      'select count(*) n from app.calls where location_id = $1 and finalized_at is not null', [ingest.id])).rows[0].n);
    const before = await finalised();
    let peak = treeRss(service.pid!);
    let sampling = true;
    const samples: number[] = [];
    const sampler = (async () => {
      while (sampling) {
        const r = treeRss(service!.pid!);
        samples.push(r.total);
        if (r.total > peak.total) peak = r;
        await sleep(250);
      }
    })();
    progress(`ingestion: signed call_analyzed, ${SENDERS} senders, ${INGEST_SECONDS} s`);
    const pgDir = path.join(dataDir, 'pg');
    const cpu0 = { node: treeCpuMs(service.pid!), pg: clusterCpuMs(pgDir), self: process.cpuUsage() };
    const loadStart = new Date();
    const ing = await cannon(postOpts(`${base}/api/voice/post-call`, INGEST_SECONDS));
    const loadEnd = new Date();
    const after = await finalised();
    const selfCpu = process.cpuUsage(cpu0.self);
    const cpuPer = {
      node: (treeCpuMs(service.pid!) - cpu0.node) / Math.max(1, after - before),
      pg: (clusterCpuMs(pgDir) - cpu0.pg) / Math.max(1, after - before),
      bench: (selfCpu.user + selfCpu.system) / 1000 / Math.max(1, after - before),
    };
    const perSecond = (after - before) / INGEST_SECONDS;
    const underLoadPeak = peak.total;
    rows.push({ name: `post-call ingestion, full fan-out (${SENDERS} senders) finalised calls/s`, value: perSecond, unit: 'calls/s',
      baseline: bIns.rps, ratio: perSecond / bIns.rps, target: '≥ 400/s',
      note: `p99 ${ing.p99} ms; ${ing.bad} failed; baseline: bare express + one INSERT per body` });
    rows.push({ name: 'CPU per finalised call during the load', value: cpuPer.node + cpuPer.pg, unit: 'ms',
      note: `service node (API + worker) ${cpuPer.node.toFixed(2)} ms + postgres ${cpuPer.pg.toFixed(2)} ms; senders and receivers (this process) ${cpuPer.bench.toFixed(2)} ms` });

    // The backlog the load left (webhook attempts, notifications), drained by the worker.
    // Webhook attempts and notifications are pending rows (the engines' queues); the rest are jobs.
    const backlog = async () => Number((await owner.query(
      `select (select count(*) from graphile_worker.jobs) + (select count(*) from app.webhook_deliveries where status = 'pending')
              + (select count(*) from app.notifications where status = 'pending') as n`)).rows[0].n);
    const left = await backlog();
    const drainStart = Date.now();
    let remaining = left;
    while (remaining > 0 && Date.now() - drainStart < DRAIN_SECONDS * 1000) {
      await sleep(1000);
      remaining = await backlog();
    }
    sampling = false;
    await sampler;
    const drained = (Date.now() - drainStart) / 1000;
    const baseRss = treeRss(baseline.pid!).total;
    rows.push({ name: 'RSS of the service process tree under ingestion (peak)', value: peak.total, unit: 'MB', baseline: baseRss,
      ratio: baseRss / peak.total, target: '≤ 300 MB',
      note: `${peak.parts.map((p) => `${p.cmd.split(' ').slice(0, 2).join(' ')} ${p.mb.toFixed(0)}`).join(' + ')}; peak during the load ${underLoadPeak.toFixed(0)} MB; idle ${idleRss.total.toFixed(0)} MB; baseline: the bare baseline process` });
    const counts = Object.fromEntries(https.counts);
    rows.push({ name: 'fan-out backlog after the load (pending webhook attempts, notifications, jobs)', value: left, unit: 'items',
      note: `${remaining === 0 ? `drained in ${drained.toFixed(0)} s` : `${remaining} left after ${DRAIN_SECONDS} s`}; received: webhooks ${(counts['/hook/bench-a'] ?? 0) + (counts['/hook/bench-b'] ?? 0)}, slack ${counts['/slack'] ?? 0}, sms ${counts['/sms'] ?? 0}, e-mail ${smtp.count()}` });

    // Emergencies of the measured seconds: from the ingestion transaction to the SMS receiver's
    // answer (the 'sent' log entry), while intake had the CPU first (docs/performance.md).
    const em = (await owner.query(
      `select count(*)::int as n, count(s.at)::int as sent,
              percentile_cont(0.5) within group (order by s.ms) as p50, percentile_cont(0.99) within group (order by s.ms) as p99
         from app.notifications n
         left join lateral (select l.at, extract(epoch from l.at - n.created_at) * 1000 as ms from app.notification_log l
                             where l.location_id = n.location_id and l.notification_id = n.id and l.status = 'sent' limit 1) s on true
        where n.location_id = $1 and n.event = 'call.emergency' and n.channel = 'sms'
          and n.created_at >= $2 and n.created_at < $3`, [ingest.id, loadStart, loadEnd])).rows[0];
    rows.push({ name: 'emergency SMS during the ingestion load (call to SMS sent, p99)', value: Math.round(em.p99 ?? 0), unit: 'ms',
      note: `${em.n} emergency SMS of the measured seconds, ${em.sent} sent; median ${Math.round(em.p50 ?? 0)} ms; counted from the ingestion transaction` });
  }

  // ---- Staff GraphQL (bench/staff.ts, docs/staff.md) --------------------------------------------
  if ((ONLY.has('staff') || !env.BENCH_ONLY) && big) {
    const { runStaffBench } = await import('./staff.js');
    rows.push(...(await runStaffBench({ owner, databaseUrl: cluster.url, apiUrl: base, adminUrl: `http://127.0.0.1:${port + 1}`, apiAuth: auth('mid'),
      bigLocationId: big.id, bigCalls: BIG_CALLS, seconds: SECONDS, connections: CONNECTIONS, progress })));
  }

  if (ONLY.has('staff-flood')) {
    const { runStaffFloodBench } = await import('./staff-flood.js');
    rows.push(...(await runStaffFloodBench({ owner, apiUrl: base, adminUrl: `http://127.0.0.1:${port + 1}`, apiAuth: auth('mid'), midLocationId: mid.id,
      seconds: num('BENCH_STAFF_FLOOD_SECONDS', 20), connections: CONNECTIONS, progress })));
  }

  // ---- Caller-data lifecycle (bench/privacy.ts): erasure and the retention prune on `big` --------
  if (ONLY.has('privacy') && big) {
    const { runPrivacyBench } = await import('./privacy.js');
    rows.push(...(await runPrivacyBench({ owner, base, voiceSecret: VOICE_SECRET, servicePhone: SERVICE_PHONE, bigId: big.id, bigSlug: 'big',
      seconds: INGEST_SECONDS, senders: SENDERS, progress })));
  }

  // ---- Agent tools during a call (bench/tools.ts) ---------------------------------------------
  if (ONLY.has('tools')) {
    const { runToolsBench } = await import('./tools.js');
    rows.push(...(await runToolsBench({ owner, base, voiceSecret: VOICE_SECRET, progress })));
  }

  // ---- Redaction at ingestion (bench/redaction.ts) ---------------------------------------------
  if (ONLY.has('redaction') || !env.BENCH_ONLY) {
    const { runRedactionBench } = await import('./redaction.js');
    rows.push(...(await runRedactionBench({ base, owner, servicePid: service.pid!, pgDir: path.join(dataDir, 'pg'), voiceSecret: VOICE_SECRET,
      senders: SENDERS, seconds: num('BENCH_REDACTION_SECONDS', 10), progress })));
  }

  // ---- Field-service write-back (bench/integrations.ts) ------------------------------------------
  if (ONLY.has('integrations') || !env.BENCH_ONLY) {
    const { runIntegrationsBench } = await import('./integrations.js');
    rows.push(...(await runIntegrationsBench({ databaseUrl: cluster.url, progress })));
  }

  // ---- Delivery-engine figures ------------------------------------------------------------------
  // HOOK: bench/delivery.ts (the delivery-engine work) exports `runDeliveryBench()` returning
  // BenchRow[]; its rows are appended to this table. Wired here once that module exists.
  const deliveryModule = path.join(projectRoot, 'bench', 'delivery.ts');
  if (fs.existsSync(deliveryModule) && (ONLY.has('delivery') || !env.BENCH_ONLY)) {
    progress('delivery engine (bench/delivery.ts)');
    const { runDeliveryBench } = (await import(deliveryModule)) as { runDeliveryBench: (ctx?: unknown) => Promise<BenchRow[]> };
    rows.push(...(await runDeliveryBench({ databaseUrl: cluster.url, dataDir })));
  }
} finally {
  await stopTree(baseline);
  await stopTree(service);
  for (const c of closers.reverse()) await c().catch(() => undefined);
  await owner.end();
  await cluster.stop();
  if (!keepDir) fs.rmSync(dataDir, { recursive: true, force: true });
}

// ---- The table ------------------------------------------------------------------------------------
const fmt = (v: number | undefined, unit = '') =>
  v === undefined ? '' : `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)}${unit ? ` ${unit}` : ''}`;
const table = rows.map((r) => [r.name, fmt(r.value, r.unit), fmt(r.baseline, r.unit), r.ratio === undefined ? '' : `${(r.ratio * 100).toFixed(0)} %`, r.target ?? '', r.note ?? '']);
const head = ['what', 'service', 'baseline', 'ratio', 'target', 'notes'];
const widths = head.map((h, i) => Math.max(h.length, ...table.map((t) => t[i].length)));
const line = (cells: string[]) => cells.map((c, i) => (i === 0 || i >= 4 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd();
console.log(`\nswitchboard bench — ${os.cpus().length} cores, ${new Date().toISOString()}, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
console.log('ratio: service/baseline for rates, baseline/service for ms and MB (100 % = at the baseline)\n');
console.log(line(head));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const t of table) console.log(line(t));
if (env.BENCH_JSON) fs.writeFileSync(env.BENCH_JSON, JSON.stringify(rows, null, 2));
