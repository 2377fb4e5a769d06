/**
 * Set-up of the tests that run the compiled service on an embedded cluster and kill its parts
 * (test/service/supervision*.test.ts): a DATA_DIR and ports per service, an HTTPS receiver for
 * lead.created, a location with a key and an endpoint, and the checks that nothing was lost and
 * that the outage logged within bounds. `useSupervisionFixture()` registers the hooks that stop
 * every process, cluster and receiver the file started.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { callFn } from '../../src/db/pools.js';
import { mintKey } from './harness.js';
import { makePki, startHttpsReceiver, type HttpsReceiver, type TestPki } from './https.js';
import { clusterPool, eventually, LeadLoad, postmasterOf, type Proc } from './service.js';
import { freePort } from './spawn.js';

let pki: TestPki;
export let rx: HttpsReceiver;
const dirs: string[] = [];
/** Processes and pools the file started: stopped after all its tests. */
export const procs: Proc[] = [];
export const pools: pg.Pool[] = [];

export function useSupervisionFixture(): void {

beforeAll(async () => {
  pki = makePki();
  rx = await startHttpsReceiver(pki);
});
afterAll(async () => {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  // A service started in a group of its own may have left its group behind.
  for (const p of procs) if (p.child.pid) try { process.kill(-p.child.pid, 'SIGKILL'); } catch { /* no such group */ }
  await Promise.all(procs.map((p) => p.exited));
  await Promise.all(pools.map((p) => p.end()));
  await rx?.close();
  for (const d of dirs) {
    // A cluster left behind by a failed run: stop it before removing its files.
    const pm = postmasterOf(d);
    if (pm) try { process.kill(pm.pid, 'SIGKILL'); } catch { /* gone */ }
    fs.rmSync(d, { recursive: true, force: true });
  }
});
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function baseEnv(extra: Record<string, string> = {}) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-supervise-'));
  dirs.push(dataDir);
  return {
    dataDir,
    env: {
      DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(await freePort()), ADMIN_PORT: String(await freePort()),
      NODE_EXTRA_CA_CERTS: pki.caFile, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_TIMEOUT_MS: '2000',
      // Quick retries, and no endpoint disabled by an attempt the outage failed.
      WEBHOOK_RETRY_DELAYS: Array(20).fill('1').join(','), WEBHOOK_DISABLE_AFTER_FAILURES: '100000',
      // An attempt whose outcome the outage kept from being recorded lapses 5 s after its claim, not 32.
      DELIVERY_LEASE_GRACE_MS: '3000',
      // The cluster stays down 2 s before the first restart: the outage is long enough to observe.
      EMBEDDED_PG_RESTART_BACKOFF_MS: '2000',
      ...extra,
    } as Record<string, string>,
  };
}

/** A location, an API key and a webhook endpoint on the receiver for lead.created. */
export async function provision(pool: pg.Pool, api: string) {
  const loc = await callFn<{ id: string }>(pool, 'admin.location_create', [{ name: 'Supervised Plumbing', slug: `sup-${Date.now()}` }]);
  const { token } = await mintKey(pool, loc.id);
  const res = await fetch(`${api}/api/v1/locations/${loc.id}/webhook-endpoints`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: rx.url, events: ['lead.created'] }),
  });
  expect(res.status).toBe(201);
  return { locationId: loc.id, token };
}

/**
 * Provisions the service at `api` (a location, key and endpoint), puts it under a steady lead load
 * and, once 20 leads were created, kills the cluster's postmaster with SIGKILL.
 */
export async function killPostmasterUnderLoad(dataDir: string, api: string) {
  const pool = clusterPool(dataDir);
  pools.push(pool);
  const { locationId, token } = await provision(pool, api);
  const load = new LeadLoad(api, locationId, token);
  await until('leads before the kill', async () => load.count(201) >= 20);
  const before = postmasterOf(dataDir)!;
  const killedAt = Date.now();
  process.kill(before.pid, 'SIGKILL');
  return { pool, locationId, load, before, killedAt };
}

export async function until(what: string, fn: () => Promise<boolean>, timeoutMs = 60_000, everyMs = 50): Promise<void> {
  for (const end = Date.now() + timeoutMs; ; await sleep(everyMs)) {
    if (await fn().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
  }
}

export const status = (url: string) => fetch(url).then((r) => r.status, () => -1);

/**
 * Every lead.created event of the location in the database has a delivered attempt, and the
 * receiver got exactly those event ids (a retry may repeat one: at least once).
 */
export async function expectEveryEventDelivered(pool: pg.Pool, locationId: string): Promise<number> {
  const undelivered = async () => {
    const { rows: [r] } = await pool.query(
      `select count(*)::int as n,
              count(*) filter (where not exists (select 1 from app.webhook_deliveries d
                                                  where d.event_id = e.id and d.status = 'delivered'))::int as missing
         from app.events e where e.location_id = $1 and e.type = 'lead.created'`, [locationId]);
    return r as { n: number; missing: number };
  };
  // Attempts whose outcome the outage kept from being recorded are sent again once their lease
  // lapses (time-out + DELIVERY_LEASE_GRACE_MS) and the sweeper re-queues them. The crontab runs
  // the sweeper at each minute; the wait queues the same task every 5 s so that it waits on the
  // lease, not on the clock.
  let swept = 0;
  await until('every event delivered', async () => {
    if (Date.now() - swept > 5000) {
      swept = Date.now();
      await pool.query(`select graphile_worker.add_job('delivery_sweep', job_key => 'test-sweep')`).catch(() => undefined);
    }
    return (await eventually(undelivered, 'count')).missing === 0;
  }, 180_000, 500);
  const { rows } = await pool.query(`select id from app.events where location_id = $1 and type = 'lead.created'`, [locationId]);
  const expected = new Set(rows.map((r) => r.id as string));
  const received = new Set(rx.received.filter((r) => r.headers['svc-event'] === 'lead.created'
    && expected.has(r.headers['svc-event-id'] as string)).map((r) => r.headers['svc-event-id'] as string));
  expect(received.size).toBe(expected.size);
  return expected.size;
}

/**
 * Warnings and errors of one message from one component written more than once per 15 s interval
 * of the outage (plus the first): bounded logging. Access-log lines are excepted (one per request
 * by design).
 */
export function repeated(output: string, outageMs: number): string[] {
  const max = 1 + Math.ceil(outageMs / 15_000);
  const counts = new Map<string, number>();
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    const rec = JSON.parse(line) as { level: number; msg: string; component?: string };
    if (rec.level < 40 || /^request (completed|aborted)$/.test(rec.msg)) continue;
    const key = `${rec.component ?? '-'}: ${rec.msg}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].filter(([, n]) => n > max).map(([m, n]) => `${n}× ${m} (at most ${max})`);
}

