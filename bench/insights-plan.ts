/**
 * Insights on a big location: 1,000,000 inbound calls (plus ~25% with leads) spread over the last
 * 365 days in one location, then EXPLAIN (ANALYZE, BUFFERS) of the insights query and the wall time
 * of api.insights for days = 1, 30 and 90 (median of 5 warm runs).
 *
 *   npx tsx bench/insights-plan.ts [calls]      (default 1000000; TEST_DATABASE_URL to use a server)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ensureDatabase, startEmbedded } from '../src/db/embedded.js';
import { migrateDatabase } from '../src/db/migrate.js';
import { hashToken } from '../src/http/route.js';
import { createLogger } from '../src/log.js';

const N = Number(process.argv[2] ?? 1_000_000);
const log = createLogger('warn', 2);
const dir = path.join(os.tmpdir(), `switchboard-bench-insights-${process.pid}`);
const cluster = process.env.TEST_DATABASE_URL ? undefined : await startEmbedded(dir, log);
const adminUrl = process.env.TEST_DATABASE_URL ?? cluster!.urlFor('postgres');
const dbName = `sb_bench_insights_${process.pid}`;
await ensureDatabase(adminUrl, dbName);
const url = new URL(adminUrl);
url.pathname = `/${dbName}`;
await migrateDatabase(url.toString(), log, { includeCurrent: true });
const owner = new pg.Client({ connectionString: url.toString() });
await owner.connect();

try {
  const loc = (await owner.query(`select (admin.location_create('{"name":"Big","slug":"big","timezone":"America/Chicago"}'::jsonb)) ->> 'id' id`)).rows[0].id;
  const token = randomUUID();
  await owner.query(`select admin.key_create('big', 'bench', array['insights:read'], $1, $2)`, [hashToken(token), token.slice(0, 8)]);
  await owner.query(`insert into app.business_hours (location_id, day, open, close) select $1, d, '08:00', '18:00' from generate_series(1, 5) d`, [loc]);
  let t0 = Date.now();
  await owner.query(`set app.seeding = 'on'`);
  await owner.query(
    `insert into app.calls (location_id, platform_call_id, caller_phone, outcome, is_emergency, service_type,
                            estimated_value, started_at, created_at, platform_status)
     select $1, 'bench_' || g, '+1512555' || lpad((g % 10000)::text, 4, '0'),
            (array['booked','transferred','lead','spam','dropped','other'])[1 + (g::bigint * 7919) % 6],
            (g % 53) = 0,
            (array['AC repair','Furnace','Water heater','Duct cleaning', null])[1 + (g::bigint * 31) % 5],
            case when (g::bigint * 7919) % 6 = 0 then 50 + (g % 900) end,
            ts, ts, 'analyzed'
       from generate_series(1, $2::int) g,
            lateral (select now() - (g::double precision / $2) * interval '365 days' as ts) x`,
    [loc, N]);
  await owner.query(
    `insert into app.leads (location_id, call_id, name, phone, created_at)
     select location_id, id, 'Lead', '+15125550100', created_at from app.calls where outcome in ('lead', 'booked', 'transferred') and (hashtext(id::text) % 3) = 0`);
  await owner.query('vacuum analyze app.calls, app.leads');
  console.log(`seeded ${N} calls in ${Date.now() - t0} ms`);

  const time = async (days: number) => {
    const runs: number[] = [];
    for (let i = 0; i < 6; i++) {
      await owner.query('begin');
      await owner.query('set local role switchboard_api');
      t0 = performance.now();
      await owner.query(`select api.insights($1, 'big', $2)`, [hashToken(token), days]);
      runs.push(performance.now() - t0);
      await owner.query('rollback');
    }
    runs.shift();
    runs.sort((a, b) => a - b);
    return runs[2];
  };
  for (const days of [1, 30, 90]) console.log(`api.insights days=${days}: median ${(await time(days)).toFixed(1)} ms`);

  // The plans of the statements inside api.insights (auto_explain: ANALYZE, BUFFERS, nested).
  for (const days of [30, 90]) {
    console.log(`\n--- plans inside api.insights(days=${days}), as switchboard_api under RLS`);
    const onNotice = (m: { message?: string }) => { if (/Query Text: with raw|leads_captured|Aggregate|Scan|Join|Sort|Hash|Buffers|duration/.test(m.message ?? '')) console.log(m.message); };
    owner.on('notice', onNotice);
    await owner.query('begin');
    await owner.query(`load 'auto_explain'`);
    await owner.query(`set local auto_explain.log_min_duration = 0; set local auto_explain.log_analyze = on; set local auto_explain.log_buffers = on;
                       set local auto_explain.log_timing = on; set local auto_explain.log_nested_statements = on; set local auto_explain.log_level = notice`);
    await owner.query('set local role switchboard_api');
    await owner.query(`select api.insights($1, 'big', $2)`, [hashToken(token), days]);
    await owner.query('rollback');
    owner.off('notice', onNotice);
  }
} finally {
  await owner.end();
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  await cluster?.stop();
  if (cluster) fs.rmSync(dir, { recursive: true, force: true });
}
