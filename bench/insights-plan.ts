/**
 * Insights on a big location: 1,000,000 inbound calls (plus ~25% with leads) spread over the last
 * 365 days in one location, then EXPLAIN (ANALYZE, BUFFERS) of the insights query and the wall time
 * of api.insights for days = 1, 30 and 90 (median of 5 warm runs).
 *
 *   npx tsx bench/insights-plan.ts [calls]      (default 1000000; TEST_DATABASE_URL to use a server)
 */
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
            (array['booked','transferred','lead','spam','dropped','other'])[1 + (g * 7919) % 6],
            (g % 53) = 0,
            (array['AC repair','Furnace','Water heater','Duct cleaning', null])[1 + (g * 31) % 5],
            case when (g * 7919) % 6 = 0 then 50 + (g % 900) end,
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
  if (process.env.NESTED_PLANS) {
    owner.on('notice', (m) => console.log(m.message));
    await owner.query(`load 'auto_explain'`);
    await owner.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on; set auto_explain.log_nested_statements = on; set auto_explain.log_level = notice`);
    await owner.query(`select api.insights($1, 'big', 30)`, [hashToken(token)]);
    await owner.query(`set auto_explain.log_min_duration = -1`);
  }
  for (const days of [1, 30, 90]) console.log(`api.insights days=${days}: median ${(await time(days)).toFixed(1)} ms`);

  // EXPLAIN of the one scan (and of the leads count) with the function's parameters inlined.
  await owner.query('begin');
  await owner.query('set local role switchboard_api');
  await owner.query(`select app.authorize($1, 'big', 'insights:read')`, [hashToken(token)]);
  const win = `c.location_id = '${loc}' and c.direction = 'inbound'
       and c.started_at >= ((now() at time zone 'America/Chicago')::date - 29)::timestamp at time zone 'America/Chicago'
       and c.started_at < ((now() at time zone 'America/Chicago')::date + 1)::timestamp at time zone 'America/Chicago'`;
  for (const [name, sql] of [
    ['calls scan + first aggregation (days=30)', `
      select (c.started_at at time zone 'America/Chicago')::date d,
             date_trunc('minute', c.started_at at time zone 'America/Chicago') - (c.started_at at time zone 'America/Chicago')::date::timestamp tod,
             extract(dow from c.started_at at time zone 'America/Chicago')::int dow,
             c.outcome = 'spam', c.outcome in ('spam', 'dropped'), c.is_emergency, c.service_type, count(*),
             coalesce(sum(c.estimated_value) filter (where c.outcome = 'booked'), 0)
        from app.calls c where ${win} group by 1, 2, 3, 4, 5, 6, 7`],
    ['leads_captured (days=30)', `
      select count(*) from app.leads l join app.calls c on c.id = l.call_id where l.location_id = '${loc}' and ${win}`],
  ]) {
    const { rows } = await owner.query(`explain (analyze, buffers, costs off) ${sql}`);
    console.log(`\n--- ${name}\n${rows.map((r) => r['QUERY PLAN']).join('\n')}`);
  }
  await owner.query('rollback');
} finally {
  await owner.end();
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  await cluster?.stop();
}
