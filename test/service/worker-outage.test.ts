/**
 * A database outage under a worker process (`npm run start:worker`) that ends its graphile-worker
 * runners (docs/operations.md, "During an outage"): each runner had a job in flight when the
 * database went, so recording that job's end failed and graphile-worker stopped the runner. The
 * runners come back by themselves, readiness says so meanwhile, the stopped runners' locked jobs
 * run again, later jobs run, and SIGTERM still exits 0 at once with no job locked.
 *
 * The worker reaches its database through a relay (test/support/db-proxy.ts) the test cuts, so
 * the outage is the worker's alone and the test's own connections keep working.
 */
import pg from 'pg';
import { createTestDatabase, endPool, type TestDatabase } from '../support/db.js';
import { startDbProxy, type DbProxy } from '../support/db-proxy.js';
import { waitFor } from '../support/harness.js';
import { expectCleanExit, startService } from '../support/service.js';
import { freePort } from '../support/spawn.js';

let db: TestDatabase;
let owner: pg.Pool;
let proxy: DbProxy;

beforeAll(async () => {
  db = await createTestDatabase();
  owner = new pg.Pool({ connectionString: db.url, max: 3 });
  proxy = await startDbProxy(db.url);
});
afterAll(async () => {
  await proxy?.close();
  if (owner) await endPool(owner);
  await db?.drop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readyz(port: number): Promise<{ status: number; checks: Record<string, { ok: boolean; detail?: string }> }> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  const body = (await res.json()) as { data?: { checks: never }; error?: { details: { checks: never } } };
  return { status: res.status, checks: body.data?.checks ?? body.error!.details.checks };
}

const addJob = (task: string, payload: string) =>
  owner.query(`select graphile_worker.add_job($1, ${payload})`, [task]);
const jobCounts = async () => (await owner.query(
  `select count(*)::int as total, count(*) filter (where locked_at is not null)::int as locked from graphile_worker._private_jobs`)).rows[0] as { total: number; locked: number };

test('runners stopped by an outage are restarted: not ready meanwhile, their jobs and later ones run, SIGTERM exits 0', async () => {
  const adminPort = await freePort();
  const worker = await startService({ DATABASE_URL: proxy.url, WORKER_ADMIN_PORT: String(adminPort) }, { mode: 'worker' });
  const holder = await owner.connect();
  try {
    await waitFor(async () => (await readyz(adminPort)).status === 200, 'worker ready', 30_000);

    // Setup: a finalize_call (jobs runner) and an integration_sync (syncs runner) each waiting
    // inside the database on a lock the test holds: both in flight when the database goes.
    await holder.query('begin');
    await holder.query('lock table app.calls, app.integration_syncs in access exclusive mode');
    await addJob('finalize_call', `json_build_object('call_id', gen_random_uuid())`);
    await addJob('integration_sync', `json_build_object('sync_id', gen_random_uuid())`);
    await waitFor(async () => (await owner.query(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
    )).rows[0].n >= 2, 'both jobs waiting on the lock');

    // Action: the database goes away. Failing the two jobs fails too, and graphile-worker stops both runners.
    await proxy.refuse();
    // Readiness names each stopped runner (the syncs runner had no check of its own).
    const stopped = 'graphile-worker runner stopped; restarting';
    await waitFor(async () => {
      const { status, checks } = await readyz(adminPort);
      return status === 503 && checks.lane_jobs?.detail === stopped && checks.lane_syncs?.detail === stopped;
    }, 'both lanes down: runner stopped', 30_000);
    // Restarts fail while the database refuses; then it comes back.
    await sleep(3000);
    await holder.query('rollback');
    await proxy.restore();

    // Assertions: ready again, every runner taking jobs.
    await waitFor(async () => (await readyz(adminPort)).status === 200, 'worker ready again', 60_000);
    await addJob('finalize_call', `json_build_object('call_id', gen_random_uuid())`);
    await addJob('integration_sync', `json_build_object('sync_id', gen_random_uuid())`);
    // The two queued now ran, and so did the two the stopped runners held locked.
    await waitFor(async () => (await jobCounts()).total === 0, 'every job run', 30_000);

    // The death is one error line per runner, naming the lane and a cause, nothing of a job.
    const deaths = worker.output().split('\n').filter((l) => /runner stopped; restarting it/.test(l)).map((l) => JSON.parse(l));
    expect(deaths.map((d) => [d.level, d.lane]).sort()).toEqual([[50, 'jobs'], [50, 'syncs']]);
    for (const d of deaths) expect([typeof d.cause, d.job, d.meta, d.payload]).toEqual(['string', undefined, undefined, undefined]);
    // Its restart is logged too; the service's stdout is flushed every 200 ms (src/log.ts), so the
    // line may reach us just after the jobs it made possible have run.
    await waitFor(async () => /syncs lane: graphile-worker runner restarted/.test(worker.output()), 'the syncs runner\'s restart logged', 5000);

    const sigterm = Date.now();
    worker.child.kill('SIGTERM');
    await expectCleanExit(worker);
    expect(Date.now() - sigterm).toBeLessThan(10_000);
    expect(await jobCounts()).toEqual({ total: 0, locked: 0 });
  } finally {
    await holder.query('rollback').catch(() => undefined);
    holder.release();
    if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
  }
}, 180_000);
