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
 *   - GET calls?from=&to= in the 1,000,000 calls (a day and a month far back, the last day; warm,
 *     sequential, median);
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
 * BENCH_INGEST_SECONDS (15), BENCH_INGEST_FANOUT (on; off: the ingestion without any fan-out), BENCH_WARMUP_SECONDS (3: the same load before the measured one, then
 * ANALYZE), BENCH_DRAIN_SECONDS (60: wait for the fan-out backlog, RSS sampled),
 * BENCH_ONLY (comma list of sections: lists, insights, ingest, privacy, idempotency, metrics,
 * staff, redaction, delivery, staff-flood, integrations; tools only when named), BENCH_STAFF_FLOOD_SECONDS (20), BENCH_REDACTION_SECONDS (10, each of redaction on and off), BENCH_DATA_DIR (keep and reuse
 * the seeded cluster there instead of a throwaway one), BENCH_JSON (also write the rows there),
 * BENCH_NODE_OPTIONS (NODE_OPTIONS for the service, to try V8 flags), BENCH_START_SCRIPT (npm
 * script that starts the service, default start; start:api leaves the worker out), WORKER_DB_NICE
 * and every STAFF_*, WEBHOOK_* and NOTIFY_* (passed to the service); the history section's own
 * knobs are in bench/history.ts.
 * Progress goes to stderr; the table to stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { hashToken } from '../src/auth/tokens.js';
import { startEmbedded } from '../src/db/embedded/index.js';
import { migrateDatabase, projectRoot } from '../src/db/migrate.js';
import { defaultSeedJobs, runDemoSeed } from '../src/cli/demo-seed.js';
import { createLogger } from '../src/log.js';
import { makePki } from '../test/support/https.js';
import {
  BIG_CALLS, CONNECTIONS, elapsed, INGEST_SECONDS, MID_CALLS, num, progress, SECONDS, SENDERS, SERVICE_PHONE, sleep, VOICE_SECRET,
  type BenchContext, type BenchRow, type Section,
} from './common.js';
import { runIngestBench } from './ingest.js';
import { runInsightsBench } from './insights.js';
import { runListsBench } from './lists.js';
import { stopTree, treeRss, waitForLine } from './load.js';
import { startCountingHttps, startCountingSmtp } from './receivers.js';

/**
 * The sections, in the order they run: one line each. BENCH_ONLY (comma list of names) runs only
 * those; without it every section runs. A new section is a module of its own and one line here.
 */
const SECTIONS: Section[] = [
  { name: 'lists', run: runListsBench },
  { name: 'idempotency', run: async (c) => {
    await c.location('idem', {});
    const { runIdempotencyBench } = await import('./idempotency.js');
    return runIdempotencyBench({ base: c.base, token: c.tokens.idem, location: 'idem', seconds: SECONDS, connections: 10, progress });
  } },
  { name: 'metrics', run: async (c) => (await import('./metrics.js')).runMetricsBench({ dataDir: c.dataDir, slug: 'mid', token: c.tokens.mid,
    seconds: SECONDS, connections: CONNECTIONS, progress }) },
  { name: 'insights', big: true, run: runInsightsBench },
  { name: 'ingest', run: runIngestBench },
  { name: 'staff', big: true, run: async (c) => (await import('./staff.js')).runStaffBench({ owner: c.owner, databaseUrl: c.databaseUrl,
    apiUrl: c.base, adminUrl: c.adminUrl, apiAuth: c.auth('mid'), bigLocationId: c.big!.id, bigCalls: BIG_CALLS, seconds: SECONDS,
    connections: CONNECTIONS, progress }) },
  { name: 'privacy', big: true, run: async (c) => (await import('./privacy.js')).runPrivacyBench({ owner: c.owner, base: c.base,
    voiceSecret: VOICE_SECRET, servicePhone: SERVICE_PHONE, bigId: c.big!.id, bigSlug: 'big', seconds: INGEST_SECONDS, senders: SENDERS, progress }) },
  { name: 'redaction', run: async (c) => (await import('./redaction.js')).runRedactionBench({ base: c.base, owner: c.owner, servicePid: c.servicePid,
    pgDir: path.join(c.dataDir, 'pg'), voiceSecret: VOICE_SECRET, senders: SENDERS, seconds: num('BENCH_REDACTION_SECONDS', 10), progress }) },
  { name: 'delivery', run: async () => (await import('./delivery.js')).runDeliveryBench({ progress }) },
  { name: 'staff-flood', run: async (c) => (await import('./staff-flood.js')).runStaffFloodBench({ owner: c.owner, apiUrl: c.base,
    adminUrl: c.adminUrl, apiAuth: c.auth('mid'), servicePid: c.servicePid, midLocationId: c.mid.id, seconds: num('BENCH_STAFF_FLOOD_SECONDS', 20), connections: CONNECTIONS, progress }) },
  { name: 'history', named: true, run: async (c) => (await import('./history.js')).runHistoryBench(c) },
  { name: 'tools', named: true, run: async (c) => (await import('./tools.js')).runToolsBench({ owner: c.owner, base: c.base, voiceSecret: VOICE_SECRET, progress }) },
  { name: 'integrations', run: async (c) => (await import('./integrations.js')).runIntegrationsBench({ databaseUrl: c.databaseUrl, progress }) },
];

const env = process.env;
const only = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',').map((s) => s.trim())) : null;
const chosen = SECTIONS.filter((s) => (only ? only.has(s.name) : !s.named));
const unknown = [...(only ?? [])].filter((n) => !SECTIONS.some((s) => s.name === n));
if (unknown.length) throw new Error(`BENCH_ONLY names unknown sections: ${unknown.join(', ')} (known: ${SECTIONS.map((s) => s.name).join(', ')})`);

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
    // Batches side by side as `demo seed` runs them; few customers, each with many calls.
    const todo = calls - have;
    let shown = 0;
    await runDemoSeed(owner, slug, { calls: todo, days, jobs: defaultSeedJobs(), batch: 50_000, customersPerCall: Math.min(20_000, Math.ceil(calls * 0.2)) / calls,
      onProgress: (done) => {
        if (done - shown < 100_000 && done < todo) return;
        shown = done;
        progress(`  ${slug}: ${(have + done).toLocaleString('en')} / ${calls.toLocaleString('en')} calls`);
      } });
    progress(`  ${slug}: seeded in ${((Date.now() - s) / 1000).toFixed(0)} s`);
  }

  const mid = await location('mid', {});
  const big = chosen.some((s) => s.big) ? await location('big', {}) : null;
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
      ...Object.fromEntries(Object.entries(env).filter(([k]) => /^(STAFF|WEBHOOK|NOTIFY)_/.test(k))),
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

  const ctx: BenchContext = {
    owner, databaseUrl: cluster.url, dataDir, base, bbase, adminUrl: `http://127.0.0.1:${port + 1}`,
    servicePid: service.pid!, baselinePid: baseline.pid!, tokens, auth: (slug) => ({ authorization: `Bearer ${tokens[slug]}` }),
    location, seed, mid, big, ingest, https, smtp, idleRss: idleRss.total,
  };
  for (const section of chosen) {
    if (section.big && !big) continue;
    progress(`section ${section.name}`);
    rows.push(...(await section.run(ctx)));
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
console.log(`\nswitchboard bench — ${os.cpus().length} cores, ${new Date().toISOString()}, ${elapsed().toFixed(0)} s`);
console.log('ratio: service/baseline for rates, baseline/service for ms and MB (100 % = at the baseline)\n');
console.log(line(head));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const t of table) console.log(line(t));
if (env.BENCH_JSON) fs.writeFileSync(env.BENCH_JSON, JSON.stringify(rows, null, 2));
