/**
 * kill -9 of the embedded PostgreSQL under load (docs/operations.md, "Supervision"). The compiled
 * service (`npm start`; `start:api` + `start:worker` on one DATA_DIR) keeps creating leads through
 * the API while the postmaster is killed: the owner restarts the cluster, the API answers 503
 * `unavailable` and /readyz 503 meanwhile with bounded logging, a process attached to the cluster
 * finds it again on its new port, and every lead.created event written before, during and after
 * the kill reaches the receiver (each event id at least once, none missing). An owner whose
 * cluster cannot start again exits non-zero.
 *
 * Needs `npm run build` (it runs dist/, as npm start does).
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { scrape } from '../support/metrics.js';
import { answers200, eventually, expectCleanExit, postmasterOf, startService } from '../support/service.js';
import {
  baseEnv, expectEveryEventDelivered, killPostmasterUnderLoad, procs, repeated, status, until, useSupervisionFixture,
} from '../support/supervision.js';
import { freePort } from '../support/spawn.js';

useSupervisionFixture();

test('npm start: kill -9 of the postmaster under load; the cluster is restarted and no event is lost', async () => {
  const { dataDir, env } = await baseEnv();
  const api = `http://127.0.0.1:${env.PORT}`;
  const admin = `http://127.0.0.1:${env.ADMIN_PORT}`;
  const svc = await startService(env, { from: 'dist', ready: () => answers200(`${admin}/readyz`) });
  procs.push(svc);
  const { pool, locationId, load, before, killedAt } = await killPostmasterUnderLoad(dataDir, api);
  // During the outage: the API's and the admin listener's readiness say so.
  await until('API /readyz 503', async () => (await status(`${api}/readyz`)) === 503);
  await until('admin /readyz 503', async () => (await status(`${admin}/readyz`)) === 503);
  const createdAtKill = load.count(201);
  await until('API ready again', async () => (await status(`${api}/readyz`)) === 200, 90_000, 200);
  await until('admin ready again (worker lanes claiming)', async () => (await status(`${admin}/readyz`)) === 200, 60_000, 200);
  const outageMs = Date.now() - killedAt;
  await until('leads after the restart', async () => load.count(201) >= createdAtKill + 20, 60_000, 100);
  await load.stop();

  const after = postmasterOf(dataDir)!;
  expect(after.pid).not.toBe(before.pid);
  expect(after.port).toBe(before.port); // the restart took the port it had
  // The outage answered 503 unavailable, never a 500.
  expect(load.count(503)).toBeGreaterThan(0);
  expect([...load.codes.keys()]).toEqual(['unavailable']);
  const events = await expectEveryEventDelivered(pool, locationId);
  // Every acknowledged lead has its event (a request cut off by the kill may have committed too).
  expect(events).toBeGreaterThanOrEqual(load.count(201));

  const m = await scrape(admin);
  expect(m.value('switchboard_embedded_postgres_restarts_total', { result: 'ok' })).toBe(1);
  expect(svc.output()).toMatch(/embedded postgres exited unexpectedly/);
  // Server log lines are written in batches (at least every 200 ms): wait for the line, not a time.
  await until('the restart logged', async () => /embedded postgres restarted/.test(svc.output()), 10_000, 100);
  // Bounded logging: no warning or error repeated more than once per 15 s of the outage.
  expect(repeated(svc.output(), outageMs)).toEqual([]);

  svc.child.kill('SIGTERM');
  await expectCleanExit(svc);
}, 300_000);

test('start:api + start:worker: the worker finds the restarted cluster on its new port and resumes', async () => {
  const { dataDir, env } = await baseEnv();
  const api = `http://127.0.0.1:${env.PORT}`;
  const workerAdmin = `http://127.0.0.1:${await freePort()}`;
  // The API process starts (and so owns) the cluster; the worker attaches to it.
  const apiProc = await startService(env, { from: 'dist', mode: 'api', ready: () => answers200(`${api}/readyz`) });
  procs.push(apiProc);
  const worker = await startService({ ...env, PORT: '', WORKER_ADMIN_PORT: new URL(workerAdmin).port },
    { from: 'dist', mode: 'worker', ready: () => answers200(`${workerAdmin}/readyz`) });
  procs.push(worker);
  const { pool, locationId, load, before, killedAt } = await killPostmasterUnderLoad(dataDir, api);
  // Another program takes the old port while the cluster is down: the restart must move.
  const squatter = net.createServer((s) => s.destroy());
  await eventually(() => new Promise<void>((resolve, reject) => {
    squatter.once('error', reject);
    squatter.listen(before.port, '127.0.0.1', () => resolve());
  }), 'take the old port', 5000);
  try {
    await until('worker /readyz 503', async () => (await status(`${workerAdmin}/readyz`)) === 503);
    const createdAtKill = load.count(201);
    await until('API ready again', async () => (await status(`${api}/readyz`)) === 200, 90_000, 200);
    const after = postmasterOf(dataDir)!;
    expect(after.port).not.toBe(before.port);
    // The attached worker dials the new port by itself: its lanes claim again.
    await until('worker ready again', async () => (await status(`${workerAdmin}/readyz`)) === 200, 60_000, 200);
    const outageMs = Date.now() - killedAt;
    await until('leads after the restart', async () => load.count(201) >= createdAtKill + 20, 60_000, 100);
    await load.stop();
    expect([...load.codes.keys()]).toEqual(['unavailable']);
    const events = await expectEveryEventDelivered(pool, locationId);
    expect(events).toBeGreaterThanOrEqual(load.count(201));
    // The worker's own metrics: its lanes, and the attempts it made.
    const m = await scrape(workerAdmin);
    expect(m.sum('switchboard_webhook_attempts_total', { outcome: '2xx' })).toBeGreaterThanOrEqual(events);
    expect(m.all('switchboard_engine_last_claim_age_seconds').length).toBe(4);
    expect(repeated(worker.output(), outageMs)).toEqual([]);
    expect(repeated(apiProc.output(), outageMs)).toEqual([]);
  } finally {
    squatter.close();
  }
  worker.child.kill('SIGTERM');
  apiProc.child.kill('SIGTERM');
  await expectCleanExit(worker);
  await expectCleanExit(apiProc);
}, 300_000);

test('an owner whose cluster cannot start again exits non-zero after its tries', async () => {
  const { dataDir, env } = await baseEnv({ EMBEDDED_PG_RESTART_TRIES: '2', EMBEDDED_PG_RESTART_BACKOFF_MS: '300' });
  const svc = await startService(env, { from: 'dist', ready: () => answers200(`http://127.0.0.1:${env.ADMIN_PORT}/readyz`) });
  procs.push(svc);
  const version = path.join(dataDir, 'pg', 'PG_VERSION');
  const pm = postmasterOf(dataDir)!;
  process.kill(pm.pid, 'SIGKILL');
  // The data directory is no longer one PostgreSQL accepts: every restart fails.
  fs.renameSync(version, `${version}.moved`);
  expect(await svc.exited).toBe(1);
  const out = svc.output();
  const failedTries = out.match(/embedded postgres restart failed/g)?.length ?? 0;
  // The whole output when not: its lines say which path the process took.
  if (failedTries !== 2) console.log(out);
  expect(failedTries).toBe(2);
  expect(out).toMatch(/embedded postgres could not be restarted; exiting so a process supervisor can take over/);
}, 120_000);
