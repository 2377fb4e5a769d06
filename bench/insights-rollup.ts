/**
 * Insights on a big location, before and after the rollup (docs/rest-api.md "Insights"):
 *
 * 1. A database at the committed migrations only (insights computed directly over calls), one
 *    location seeded with N inbound calls (default 1,000,000) over the last 90 days by the demo
 *    seeder (admin.demo_seed_prepare / demo_seed_calls / demo_seed_finish, as `npm run bench`
 *    seeds), then api.insights for days = 7, 30, 90 timed warm.
 * 2. migrations/current.sql applied on top (its backfill builds the rollup from those calls),
 *    then api.insights timed again, and checked equal to the direct reference
 *    (app.insights_direct) and to the old answer.
 * 3. Seeding speed: the first 200,000 calls of step 1 against 200,000 calls seeded into a fresh
 *    database that has the rollup triggers.
 *
 * Timings are the median of 5 warm runs of `select api.insights(…)` as switchboard_api under
 * RLS, token check included.
 *
 *   npx tsx bench/insights-rollup.ts [calls]     (TEST_DATABASE_URL to use a running server)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ensureDatabase, startEmbedded } from '../src/db/embedded/index.js';
import { migrateDatabase } from '../src/db/migrate.js';
import { hashToken } from '../src/auth/tokens.js';
import { createLogger } from '../src/log.js';

const N = Number(process.argv[2] ?? 1_000_000);
const SEED_COMPARE = Math.min(200_000, N);
const BATCH = 20_000;
const log = createLogger('warn', 2);
const dir = path.join(os.tmpdir(), `switchboard-bench-rollup-${process.pid}`);
const cluster = process.env.TEST_DATABASE_URL ? undefined : await startEmbedded(dir, log);
const adminUrl = process.env.TEST_DATABASE_URL ?? cluster!.urlFor('postgres');
const dbUrl = (name: string) => {
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
};
const bigDb = `sb_bench_rollup_${process.pid}`;
const freshDb = `sb_bench_rollup_seed_${process.pid}`;
const say = (s: string) => process.stderr.write(`${s}\n`);
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Seeds `calls` calls into a new location the way `npm run bench` does; returns its slug, token and the time of each phase. */
async function seed(c: pg.Client, calls: number, onProgress?: (done: number, ms: number) => void) {
  const slug = `big-${randomUUID().slice(0, 8)}`;
  await c.query(`select admin.location_create(jsonb_build_object('name', 'Big HVAC', 'slug', $1::text, 'timezone', 'America/Chicago'))`, [slug]);
  const token = randomUUID();
  await c.query(`select admin.key_create($1, 'bench', array['insights:read'], $2, $3)`, [slug, hashToken(token), token.slice(0, 8)]);
  let t0 = performance.now();
  const first = Number((await c.query('select admin.demo_seed_prepare($1) ->> \'first_number\' as n', [slug])).rows[0].n);
  let number = first;
  const prepare = performance.now() - t0;
  t0 = performance.now();
  for (let done = 0; done < calls; done += BATCH) {
    const n = Math.min(BATCH, calls - done);
    await c.query('select admin.demo_seed_calls($1, $2, $3, 0, 90)', [slug, n, number]);
    number += Math.ceil(n * 0.7);
    onProgress?.(Math.min(done + BATCH, calls), performance.now() - t0);
  }
  const callsMs = performance.now() - t0;
  t0 = performance.now();
  await c.query('select admin.demo_seed_finish($1)', [slug]);
  const finish = performance.now() - t0;
  return { slug, token, prepare, calls: callsMs, finish };
}

async function timeInsights(c: pg.Client, token: string, slug: string, fn: string, days: number, runs = 5) {
  const times: number[] = [];
  let out: unknown;
  for (let i = 0; i <= runs; i++) {
    await c.query('begin');
    await c.query('set local role switchboard_api');
    const t0 = performance.now();
    out = (await c.query(`select ${fn}($1, $2, $3) as r`, [hashToken(token), slug, days])).rows[0].r;
    if (i > 0) times.push(performance.now() - t0); // the first run warms the cache
    await c.query('rollback');
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)], out };
}

const big = new pg.Client({ connectionString: dbUrl(bigDb) });
const fresh = new pg.Client({ connectionString: dbUrl(freshDb) });
try {
  await ensureDatabase(adminUrl, bigDb);
  await migrateDatabase(dbUrl(bigDb), log, { includeCurrent: false });
  await big.connect();

  say(`1. committed schema: seeding ${N} calls…`);
  let first200k = 0;
  const s = await seed(big, N, (done, ms) => {
    if (done === SEED_COMPARE) first200k = ms;
    if (done % 100_000 === 0) say(`   ${done} calls, ${secs(ms)}`);
  });
  await big.query('vacuum analyze');
  const before: Record<number, { ms: number; out: any }> = {};
  for (const days of [7, 30, 90]) before[days] = await timeInsights(big, s.token, s.slug, 'api.insights', days);

  say('2. applying migrations/current.sql (backfill)…');
  let t0 = performance.now();
  await migrateDatabase(dbUrl(bigDb), log, { includeCurrent: true });
  const migrateMs = performance.now() - t0;
  await big.query('vacuum analyze');
  const after: Record<number, { ms: number; out: any }> = {};
  const direct: Record<number, { ms: number; out: any }> = {};
  const { rows: [{ id: locId }] } = await big.query('select id from app.locations where slug = $1', [s.slug]);
  for (const days of [7, 30, 90]) {
    after[days] = await timeInsights(big, s.token, s.slug, 'api.insights', days);
    const d0 = performance.now();
    const r = await big.query('select app.insights_direct($1, $2, now()) r', [locId, days]);
    direct[days] = { ms: performance.now() - d0, out: r.rows[0].r };
  }
  t0 = performance.now();
  await big.query('select app_private.insights_rebuild($1)', [locId]); // what a timezone change does
  const rebuildMs = performance.now() - t0;
  const { rows: [sizes] } = await big.query(
    `select (select count(*) from app.insights_hourly) hourly, (select count(*) from app.insights_services) services,
            (select count(*) from app.calls) calls`);

  say(`3. fresh database with the rollup: seeding ${SEED_COMPARE} calls…`);
  await ensureDatabase(adminUrl, freshDb);
  await migrateDatabase(dbUrl(freshDb), log, { includeCurrent: true });
  await fresh.connect();
  const s2 = await seed(fresh, SEED_COMPARE);

  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b) ? 'yes' : 'NO';
  console.log(`\ninsights, one location, ${sizes.calls} calls over the last 90 days (America/Chicago); median of 5 warm runs`);
  console.log(`${'days'.padEnd(6)} ${'before (direct)'.padStart(16)} ${'after (rollup)'.padStart(15)} ${'speed-up'.padStart(9)} ${'reference'.padStart(10)}  same as reference / as before`);
  for (const days of [7, 30, 90]) {
    const b = before[days];
    const a = after[days];
    console.log(`${String(days).padEnd(6)} ${`${b.ms.toFixed(1)} ms`.padStart(16)} ${`${a.ms.toFixed(1)} ms`.padStart(15)} ${`${(b.ms / a.ms).toFixed(0)}x`.padStart(9)} ${`${direct[days].ms.toFixed(0)} ms`.padStart(10)}  ${same(a.out, direct[days].out)} / ${same(a.out, JSON.parse(JSON.stringify(b.out)))}`);
  }
  const w = after[90].out;
  const inWindow = w.per_day.reduce((n: number, d: { calls: number }) => n + d.calls, 0) + w.spam_blocked;
  console.log(`inbound calls in the 90-day window: ${inWindow}; rollup rows: ${sizes.hourly} hourly, ${sizes.services} service-days`);
  console.log(`migrations/current.sql on ${sizes.calls} calls (after-hours backfill + rollup build): ${secs(migrateMs)}; ` +
    `rebuilding the location's rollup (as a timezone change does): ${secs(rebuildMs)}`);
  console.log(`seeding ${SEED_COMPARE} calls (demo_seed_calls): before ${secs(first200k)}, after ${secs(s2.calls)}; ` +
    `whole seed of ${N} before: prepare ${secs(s.prepare)}, calls ${secs(s.calls)}, finish ${secs(s.finish)}; ` +
    `${SEED_COMPARE} after: prepare ${secs(s2.prepare)}, finish ${secs(s2.finish)}`);
} finally {
  await big.end().catch(() => undefined);
  await fresh.end().catch(() => undefined);
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${bigDb} with (force)`);
  await admin.query(`drop database if exists ${freshDb} with (force)`);
  await admin.end();
  await cluster?.stop();
  if (cluster) fs.rmSync(dir, { recursive: true, force: true });
}
