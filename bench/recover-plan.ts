/**
 * Recovery at scale: an endpoint misses N events (paused while they were written), then
 * POST /recover's SQL function runs as the API role (under RLS, as the route calls it), with the
 * statistics as a burst leaves them (not analysed since). Two shapes of backlog, each on a fresh
 * location: with no other attempts for the endpoint, and beside N delivered attempts of earlier
 * events. Prints the wall time of one call of N (RECOVER_MAX_EVENTS = 10,000) and of calls of
 * 1,000 until has_more is false (per call). Then the other side of a long outage: re-enabling
 * (PATCH active=true) an endpoint with N held attempts.
 *
 *   npx tsx bench/recover-plan.ts [events]      (default 10000; TEST_DATABASE_URL to use a server)
 *
 * Timings on a shared machine are noisy; what matters is the shape (per-call times flat, no call
 * near the API's 15 s statement time-out). docs/webhooks.md quotes the figures.
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

const N = Number(process.argv[2] ?? 10_000);
const log = createLogger('warn', 2);
const dir = path.join(os.tmpdir(), `switchboard-bench-recover-${process.pid}`);
const cluster = process.env.TEST_DATABASE_URL ? undefined : await startEmbedded(dir, log);
const adminUrl = process.env.TEST_DATABASE_URL ?? cluster!.urlFor('postgres');
const dbName = `sb_bench_recover_${process.pid}`;
await ensureDatabase(adminUrl, dbName);
const url = new URL(adminUrl);
url.pathname = `/${dbName}`;
await migrateDatabase(url.toString(), log, { includeCurrent: true });
const owner = new pg.Client({ connectionString: url.toString() });
await owner.connect();

/** `count` events in one transaction, as a burst of calls would write them. */
async function emit(loc: string, count: number): Promise<void> {
  await owner.query('begin');
  await owner.query(`select set_config('app.location_id', $1, true)`, [loc]);
  await owner.query(`select app.emit($1, 'lead.created', jsonb_build_object('n', i)) from generate_series(1, $2::int) i`, [loc, count]);
  await owner.query('commit');
}

/** api.webhook_endpoint_recover as the API role; wall time in ms. */
async function recover(token: string, endpoint: string, since: string, max: number) {
  await owner.query('begin');
  await owner.query('set local role switchboard_api');
  await owner.query(`set local statement_timeout = '15s'`);
  const t0 = performance.now();
  try {
    const { rows } = await owner.query(`select api.webhook_endpoint_recover($1, null, $2, $3, 30, $4) as r`, [hashToken(token), endpoint, since, max]);
    const ms = performance.now() - t0;
    await owner.query('commit');
    return { ...(rows[0].r as { queued: number; has_more: boolean }), ms };
  } catch (err) {
    await owner.query('rollback');
    return { queued: 0, has_more: false, ms: performance.now() - t0, error: (err as Error).message };
  }
}

try {
  for (const history of [0, N]) {
    for (const batch of [N, 1000]) {
      const slug = `recover-${history}-${batch}-${randomUUID().slice(0, 6)}`;
      const loc = (await owner.query(`select (admin.location_create(jsonb_build_object('name', 'Bench', 'slug', $1::text))) ->> 'id' id`, [slug])).rows[0].id as string;
      const token = randomUUID();
      await owner.query(`select admin.key_create($1, 'bench', array['webhooks:write'], $2, $3)`, [slug, hashToken(token), token.slice(0, 8)]);
      const ep = (await owner.query(
        `insert into app.webhook_endpoints (location_id, url, events, secret, active)
         values ($1, 'https://receiver.example/hook', '{lead.created}', app.webhook_new_secret(), false) returning id`, [loc])).rows[0].id as string;
      if (history) {
        await emit(loc, history);
        await owner.query(
          `insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url)
           select location_id, id, $2, type, 1, 'delivered', 'https://receiver.example/hook' from app.events where location_id = $1`, [loc, ep]);
      }
      const since = (await owner.query(`select app.iso(now()) as t`)).rows[0].t as string;
      await emit(loc, N);
      await owner.query(`update app.webhook_endpoints set active = true where id = $1`, [ep]);
      const calls = [];
      for (;;) {
        const r = await recover(token, ep, since, batch);
        calls.push(r);
        if (!r.has_more || 'error' in r || calls.length > N / batch + 1) break;
      }
      const queued = calls.reduce((s, c) => s + c.queued, 0);
      const errors = calls.filter((c) => 'error' in c).map((c) => (c as { error: string }).error);
      console.log(`${N} missed, ${history} delivered before: calls of ${batch} → ${queued} queued in ${calls.length} call(s), `
        + `total ${calls.reduce((s, c) => s + c.ms, 0).toFixed(0)} ms, per call ${calls.map((c) => c.ms.toFixed(0)).join('/')} ms`
        + (errors.length ? `, errors: ${errors.join('; ')}` : ''));
    }
  }

  // Re-enabling with a backlog: N attempts held (retries due in a minute) while the endpoint was off.
  const slug = `resume-${randomUUID().slice(0, 6)}`;
  const loc = (await owner.query(`select (admin.location_create(jsonb_build_object('name', 'Bench', 'slug', $1::text))) ->> 'id' id`, [slug])).rows[0].id as string;
  const token = randomUUID();
  await owner.query(`select admin.key_create($1, 'bench', array['webhooks:write'], $2, $3)`, [slug, hashToken(token), token.slice(0, 8)]);
  const ep = (await owner.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret, active)
     values ($1, 'https://receiver.example/hook', '{lead.created}', app.webhook_new_secret(), false) returning id`, [loc])).rows[0].id as string;
  await emit(loc, N);
  await owner.query(
    `insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
     select location_id, id, $2, type, 2, 'pending', 'https://receiver.example/hook', now() + interval '1 minute'
       from app.events where location_id = $1`, [loc, ep]);
  await owner.query('begin');
  await owner.query('set local role switchboard_api');
  const t0 = performance.now();
  await owner.query(`select api.webhook_endpoint_patch($1, null, $2, '{"active": true}')`, [hashToken(token), ep]);
  console.log(`PATCH active=true with ${N} held attempts: ${(performance.now() - t0).toFixed(0)} ms`);
  await owner.query('commit');
} finally {
  await owner.end();
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  await cluster?.stop();
  if (cluster) fs.rmSync(dir, { recursive: true, force: true });
}
