/**
 * Exactly one supervisor for the embedded cluster (docs/operations.md, "Supervision";
 * src/db/embedded/handle.ts), with the compiled service as an operator runs it:
 * (a) kill -9 of `npm start`'s process group leaves the cluster running; the next `npm start`
 *     adopts it (never merely attaches), so a kill -9 of the postmaster after that is recovered
 *     within 30 s, with no 500 and every acknowledged lead in the database;
 * (b) split processes: kill -9 of the supervising `start:api` → the other `start:api` and the
 *     `start:worker` keep serving, one of them takes over, and a postmaster kill -9 after that is
 *     recovered (and every lead.created event delivered);
 * (c) processes started together on a fresh DATA_DIR: one initialises and starts the cluster,
 *     the others attach; a postmaster kill -9 is restarted by exactly one of them.
 *
 * Needs `npm run build` (it runs dist/, as npm start does).
 */
import type pg from 'pg';
import { clusterPool, answers200, expectCleanExit, LeadLoad, postmasterOf, startService, type Proc } from '../support/service.js';
import { freePort } from '../support/spawn.js';
import {
  baseEnv, expectEveryEventDelivered, pools, procs, provision, status, until, useSupervisionFixture,
} from '../support/supervision.js';

useSupervisionFixture();

const SUPERVISES = /supervising the embedded postgres already running \(adopted\)|embedded postgres started|this process supervises it now/;
const count = (procsToScan: Proc[], re: RegExp) => procsToScan.reduce((n, p) => n + (p.output().match(new RegExp(re, 'g'))?.length ?? 0), 0);

/** Every lead the API acknowledged is in the database. */
async function expectNoAcceptedWriteLost(pool: pg.Pool, load: LeadLoad): Promise<void> {
  expect(load.created.length).toBe(load.count(201));
  const { rows: [r] } = await pool.query('select count(*)::int as n from app.leads where id = any($1::uuid[])', [load.created]);
  expect(r.n).toBe(load.created.length);
}

function pool(dataDir: string): pg.Pool {
  const p = clusterPool(dataDir);
  pools.push(p);
  return p;
}

test('(a) kill -9 of npm start\'s group, start again: the cluster is adopted, and a postmaster kill -9 is recovered within 30 s', async () => {
  const { dataDir, env } = await baseEnv();
  const api = `http://127.0.0.1:${env.PORT}`;
  const first = await startService(env, { from: 'dist', group: true, ready: () => answers200(`http://127.0.0.1:${env.ADMIN_PORT}/readyz`) });
  procs.push(first);
  const db = pool(dataDir);
  const { locationId, token } = await provision(db, api);
  const before = postmasterOf(dataDir)!;

  // What the OOM killer or a crash does to the whole group: the cluster, in its own group, lives on.
  const load1 = new LeadLoad(api, locationId, token);
  await until('leads before the crash', async () => load1.count(201) >= 10);
  process.kill(-first.child.pid!, 'SIGKILL');
  await first.exited;
  await load1.stop();
  expect(postmasterOf(dataDir)!.pid).toBe(before.pid);
  expect(await status(`${api}/readyz`)).toBe(-1);

  const second = await startService(env, { from: 'dist', group: true, ready: () => answers200(`http://127.0.0.1:${env.ADMIN_PORT}/readyz`) });
  procs.push(second);
  expect(second.output()).toMatch(/supervising the embedded postgres already running \(adopted\)/);
  expect(second.output()).not.toMatch(/embedded postgres started/);

  const load2 = new LeadLoad(api, locationId, token);
  await until('leads on the adopted cluster', async () => load2.count(201) >= 10);
  process.kill(before.pid, 'SIGKILL');
  await until('API /readyz 503', async () => (await status(`${api}/readyz`)) === 503);
  const createdAtKill = load2.count(201);
  // Ready again within 30 s of the kill (detection, the 2 s backoff, the start, the pools).
  await until('API ready again', async () => (await status(`${api}/readyz`)) === 200, 30_000, 100);
  await until('leads after the restart', async () => load2.count(201) >= createdAtKill + 10, 30_000, 100);
  await load2.stop();

  expect(postmasterOf(dataDir)!.pid).not.toBe(before.pid);
  expect(second.output()).toMatch(/embedded postgres exited unexpectedly/);
  // Attached connections see the new postmaster before the supervisor's start resolves and logs.
  await until('the restart logged', async () => /embedded postgres restarted/.test(second.output()), 10_000, 100);
  // No 500: the outage answered 503 unavailable.
  expect(load2.statuses.get(500) ?? 0).toBe(0);
  expect([...load2.codes.keys()].filter((c) => c !== 'unavailable')).toEqual([]);
  await expectNoAcceptedWriteLost(db, load1);
  await expectNoAcceptedWriteLost(db, load2);

  second.child.kill('SIGTERM');
  await expectCleanExit(second);
  expect(postmasterOf(dataDir) === null || !alive(postmasterOf(dataDir)!.pid)).toBe(true);
}, 300_000);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('(b) split processes: kill -9 of the supervising start:api; the others keep serving, one takes over and recovers a postmaster kill -9', async () => {
  const { dataDir, env } = await baseEnv();
  const owner = await startService(env, { from: 'dist', group: true, mode: 'api', ready: () => answers200(`http://127.0.0.1:${env.PORT}/readyz`) });
  procs.push(owner);
  expect(owner.output()).toMatch(/embedded postgres started/);
  const apiB = `http://127.0.0.1:${await freePort()}`;
  const other = await startService({ ...env, PORT: new URL(apiB).port, ADMIN_PORT: String(await freePort()) },
    { from: 'dist', group: true, mode: 'api', ready: () => answers200(`${apiB}/readyz`) });
  procs.push(other);
  const workerAdmin = `http://127.0.0.1:${await freePort()}`;
  const worker = await startService({ ...env, PORT: '', WORKER_ADMIN_PORT: new URL(workerAdmin).port },
    { from: 'dist', group: true, mode: 'worker', ready: () => answers200(`${workerAdmin}/readyz`) });
  procs.push(worker);
  const survivors = [other, worker];
  expect(count(survivors, SUPERVISES)).toBe(0);

  const db = pool(dataDir);
  const { locationId, token } = await provision(db, apiB);
  const load = new LeadLoad(apiB, locationId, token);
  await until('leads before the kill', async () => load.count(201) >= 10);
  const pm = postmasterOf(dataDir)!;
  process.kill(-owner.child.pid!, 'SIGKILL');
  await owner.exited;

  // The others keep serving on the same postmaster; exactly one of them supervises it now.
  await until('a survivor took over', async () => count(survivors, /this process supervises it now/) === 1, 30_000);
  const atTakeover = load.count(201);
  await until('leads after the owner died', async () => load.count(201) >= atTakeover + 10);
  expect(postmasterOf(dataDir)!.pid).toBe(pm.pid);
  expect([...load.statuses.keys()]).toEqual([201]);
  expect(await status(`${workerAdmin}/readyz`)).toBe(200);
  const taker = survivors.find((p) => /this process supervises it now/.test(p.output()))!;
  expect(taker.output()).toMatch(/supervising the embedded postgres already running \(adopted\)/);

  // The new supervisor brings a killed postmaster back.
  process.kill(pm.pid, 'SIGKILL');
  await until('API /readyz 503', async () => (await status(`${apiB}/readyz`)) === 503);
  const atKill = load.count(201);
  await until('API ready again', async () => (await status(`${apiB}/readyz`)) === 200, 30_000, 100);
  await until('worker ready again', async () => (await status(`${workerAdmin}/readyz`)) === 200, 60_000, 200);
  await until('leads after the restart', async () => load.count(201) >= atKill + 10, 30_000, 100);
  await load.stop();
  // Attached processes see the new postmaster before the supervisor's start resolves and logs.
  await until('the restart logged', async () => count(survivors, /embedded postgres restarted/) >= 1, 10_000, 100);
  expect(count(survivors, /embedded postgres restarted/)).toBe(1);
  expect(taker.output()).toMatch(/embedded postgres restarted/);
  expect(load.statuses.get(500) ?? 0).toBe(0);
  expect([...load.codes.keys()].filter((c) => c !== 'unavailable')).toEqual([]);
  await expectNoAcceptedWriteLost(db, load);
  expect(await expectEveryEventDelivered(db, locationId)).toBeGreaterThanOrEqual(load.count(201));

  // The supervisor last: it stops the cluster.
  for (const p of [...survivors.filter((x) => x !== taker), taker]) {
    p.child.kill('SIGTERM');
    await expectCleanExit(p);
  }
}, 300_000);

test('(c) three processes started together on a fresh DATA_DIR: one starts the cluster, one restarts it', async () => {
  const { dataDir, env } = await baseEnv();
  const ports = await Promise.all([0, 1, 2].map(async () => ({ api: await freePort(), admin: await freePort() })));
  const started = await Promise.all(ports.map(({ api, admin }) =>
    startService({ ...env, PORT: String(api), ADMIN_PORT: String(admin) },
      { from: 'dist', group: true, mode: 'api', ready: () => answers200(`http://127.0.0.1:${api}/readyz`) })));
  procs.push(...started);
  // One initdb, one postmaster start; no second postmaster ever tried on the data directory.
  expect(count(started, /initialising embedded postgres/)).toBe(1);
  expect(count(started, /embedded postgres started/)).toBe(1);
  expect(count(started, /lock file .* already exists|another PostgreSQL running/)).toBe(0);

  const pm = postmasterOf(dataDir)!;
  process.kill(pm.pid, 'SIGKILL');
  // A new postmaster first (right after the kill the old pid file and cached readiness still stand).
  await until('every API ready again on a new postmaster', async () => (postmasterOf(dataDir)?.pid ?? pm.pid) !== pm.pid
    && (await Promise.all(ports.map(({ api }) => status(`http://127.0.0.1:${api}/readyz`)))).every((s) => s === 200), 30_000, 100);
  expect(postmasterOf(dataDir)!.pid).not.toBe(pm.pid);
  expect(count(started, /embedded postgres exited unexpectedly/)).toBe(1);
  // Attached processes see the new postmaster before the supervisor's start resolves and logs.
  await until('the restart logged', async () => count(started, /embedded postgres restarted/) >= 1, 10_000, 100);
  expect(count(started, /embedded postgres restarted/)).toBe(1);
  expect(count(started, /lock file .* already exists|another PostgreSQL running/)).toBe(0);

  // The supervisor last: it stops the cluster.
  const supervisor = started.find((p) => /embedded postgres restarted/.test(p.output()))!;
  for (const p of [...started.filter((x) => x !== supervisor), supervisor]) {
    p.child.kill('SIGTERM');
    await expectCleanExit(p);
  }
}, 300_000);
