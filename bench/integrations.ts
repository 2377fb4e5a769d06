/**
 * Bench section `integrations` (docs/integrations.md): field-service write-back.
 *
 * 100 locations, each connected to ServiceTitan (an HTTPS stand-in of its bookings API with an
 * oauth2-mock-server token endpoint, in this process), and the production sync runner
 * (src/worker/index.ts, its own graphile-worker runner) on a pool of its own.
 *
 * 1. 1,000 leads (10 per location, round-robin, BENCH_SYNC_RATE a second, each in its own
 *    transaction as a call's would be) → all synced; syncs per second over the run and the p99 from
 *    the lead's creation (its lead.created event, same transaction) to the sync's record of the
 *    remote id.
 * 2. The same again with one location's ServiceTitan tenant black-holed (requests held, never
 *    answered: each attempt waits WEBHOOK_TIMEOUT_MS): the other 99 locations' p99.
 */
import fs from 'node:fs';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { migrateDatabase } from '../src/db/migrate.js';
import { createOwnerPool, createWorkerPool } from '../src/db/pools.js';
import { integrationKey, seal, SECRETS } from '../src/integrations/crypto.js';
import { clientCredentials } from '../src/integrations/oauth.js';
import { createLogger } from '../src/log.js';
import { startWorker } from '../src/worker/index.js';
import { startFieldServiceWorld } from '../test/support/field-service.js';
import { makePki } from '../test/support/https.js';
import type { BenchRow } from './common.js';

export interface IntegrationsBenchOptions {
  /** The bench cluster: a database of its own is made there (the service's worker must not take these jobs). */
  databaseUrl: string;
  locations?: number;
  leadsPerLocation?: number;
  /** Leads per second (BENCH_SYNC_RATE, 50). */
  rate?: number;
  progress?: (msg: string) => void;
}

const p99 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)] ?? 0;
};

async function tenantTx<T>(pool: pg.Pool, loc: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [loc]);
    const r = await fn(c);
    await c.query('commit');
    return r;
  } catch (e) {
    await c.query('rollback');
    throw e;
  } finally {
    c.release();
  }
}

export async function runIntegrationsBench(opts: IntegrationsBenchOptions): Promise<BenchRow[]> {
  const say = opts.progress ?? ((l: string) => process.stderr.write(`${l}\n`));
  const nLoc = opts.locations ?? 100;
  const perLoc = opts.leadsPerLocation ?? 10;
  const rate = opts.rate ?? Number(process.env.BENCH_SYNC_RATE ?? 50);
  const log = createLogger('warn', 2);
  // A database of its own: the bench service's worker (another key, no stand-ins) must not run these syncs.
  const admin = new pg.Client({ connectionString: opts.databaseUrl });
  await admin.connect();
  const dbName = `sb_bench_integrations_${Date.now().toString(36)}`;
  await admin.query(`create database ${dbName}`);
  await admin.end();
  const u = new URL(opts.databaseUrl);
  u.pathname = `/${dbName}`;
  const databaseUrl = u.href;
  say('integrations: migrating a database of its own');
  await migrateDatabase(databaseUrl, log, { includeCurrent: true });
  const pki = makePki();
  const world = await startFieldServiceWorld(pki);
  const cfg = loadConfig({ ...world.env, DATABASE_URL: databaseUrl, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', LOG_LEVEL: 'warn',
    WEBHOOK_TIMEOUT_MS: process.env.WEBHOOK_TIMEOUT_MS ?? '5000' });
  const owner = createOwnerPool(databaseUrl, 6, 'bench-integrations');
  const workerPool = createWorkerPool(databaseUrl, 24, 'bench-integrations-worker');
  const rows: BenchRow[] = [];
  let worker: Awaited<ReturnType<typeof startWorker>> | null = null;
  try {
    say(`integrations: ${nLoc} locations connected to a ServiceTitan stand-in`);
    const token = await clientCredentials({ allowPrivate: true, ca: pki.caPem, timeoutMs: 5000 }, cfg.SERVICETITAN_AUTH_URL, 'st-client', 'st-secret');
    const sealed = seal(integrationKey(cfg), SECRETS, { client_id: 'st-client', client_secret: 'st-secret', access_token: token.access_token });
    const locs: string[] = [];
    const run = Date.now().toString(36);
    for (let i = 0; i < nLoc; i++) {
      const loc = await owner.query<{ r: { id: string } }>('select admin.location_create($1) as r', [{ name: `Sync ${i}`, slug: `sync-${run}-${i}` }]);
      const id = loc.rows[0].r.id;
      locs.push(id);
      await tenantTx(owner, id, (c) => c.query(
        `insert into app.integrations (location_id, provider, status, external_id, expires_at, secrets_ciphertext, connected_at)
         values ($1, 'servicetitan', 'connected', $2, $3, $4, now())`, [id, String(5000 + i), token.expires_at.toISOString(), sealed]));
    }
    worker = await startWorker({ cfg, log, pool: workerPool, ca: pki.caPem }, { cron: false, pollInterval: 500 });

    const phase = async (label: string, only: string[]) => {
      const t0 = Date.now();
      // Paced, round-robin over the locations: a lead every 1/rate s, as calls arrive.
      const total = locs.length * perLoc;
      for (let n = 0; n < total; n++) {
        const wait = t0 + (n * 1000) / rate - Date.now();
        if (wait > 0) await new Promise((ok) => setTimeout(ok, wait));
        const i = n % locs.length;
        await tenantTx(owner, locs[i], (c) => c.query("insert into app.leads (location_id, name, phone, notes) values ($1, 'Bench Caller', $2, 'No heat')",
          [locs[i], `+1512${String(1_000_000 + n).slice(-7)}`]));
      }
      const expected = only.length * perLoc;
      const deadline = Date.now() + 300_000;
      let done: { ms: number; at: number }[] = [];
      while (Date.now() < deadline) {
        const r = await owner.query<{ ms: number; at: number }>(
          `select extract(epoch from (s.updated_at - l.created_at)) * 1000 as ms, extract(epoch from s.updated_at) * 1000 as at
             from app.integration_syncs s join app.leads l on l.id = s.record_id and l.location_id = s.location_id
            where s.status = 'synced' and s.location_id = any($1) and l.created_at >= to_timestamp($2 / 1000.0)`, [only, t0]);
        done = r.rows.map((x) => ({ ms: Number(x.ms), at: Number(x.at) }));
        if (done.length >= expected) break;
        await new Promise((ok) => setTimeout(ok, 200));
      }
      const last = Math.max(...done.map((d) => d.at));
      say(`${label}: ${done.length}/${expected} synced`);
      return { synced: done.length, expected, seconds: (last - t0) / 1000, p99: p99(done.map((d) => d.ms)) };
    };

    say(`integrations: ${nLoc * perLoc} leads`);
    const a = await phase('all answering', locs);
    rows.push({ name: `integrations: ${a.expected} leads → synced`, value: a.synced / a.seconds, unit: 'syncs/s',
      note: `${a.synced}/${a.expected} synced in ${a.seconds.toFixed(1)} s, leads offered at up to ${rate}/s (the feed, one transaction per lead, bounds this rate)` });
    rows.push({ name: 'integrations: p99 lead.created → remote record', value: a.p99, unit: 'ms' });

    const blackholed = '5000';
    world.st.hold = (r) => r.path.startsWith(`/crm/v2/tenant/${blackholed}/`);
    say('integrations: again with one location\'s provider black-holed');
    const others = locs.slice(1);
    const b = await phase('one black-holed', others);
    rows.push({ name: 'integrations: p99 of the other locations, one provider black-holed', value: b.p99, unit: 'ms', target: '< 1000 ms',
      note: `${b.synced}/${b.expected} of the other ${others.length} locations synced in ${b.seconds.toFixed(1)} s (${(b.synced / b.seconds).toFixed(0)} syncs/s)` });
  } finally {
    world.st.hold = undefined;
    await worker?.stop();
    await workerPool.end();
    await owner.end();
    await world.close();
    fs.rmSync(pki.dir, { recursive: true, force: true });
  }
  return rows;
}
