/**
 * graphile-worker jobs locked by a worker that died (docs/delivery-engine.md, "The sweeper"): each
 * live runner writes a heartbeat, and the sweep unlocks the jobs of pools not seen for
 * WORKER_GONE_SECONDS, so a finalize_call whose worker was killed mid-job runs again within
 * minutes instead of after graphile-worker's 4-hour lock expiry. A live worker's job, however long
 * it has been running, and a lock taken recently are left alone.
 */
import type pg from 'pg';
import { createWorkerPool } from '../../src/db/pools.js';
import { startWorker, type Worker } from '../../src/worker/index.js';
import { sweep, WORKER_GONE_SECONDS } from '../../src/worker/sweep.js';
import { testLog, useTestApi, waitFor } from '../support/harness.js';

const t = useTestApi();
let pool: pg.Pool;
let worker: Worker | undefined;

beforeAll(async () => {
  pool = createWorkerPool(t.db.url, 6, 'test-worker');
  worker = await startWorker({ cfg: t.cfg, log: testLog, pool }, { pollInterval: 200, cron: false });
});
afterAll(async () => {
  await worker?.stop();
  await pool?.end();
});

/** A finalize_call job locked by `lockedBy` `lockedAgo` ago, as that pool left it (its call does not exist: the task is a no-op). */
async function lockedJob(lockedBy: string, lockedAgo: string): Promise<string> {
  const { rows: [job] } = await t.owner.query(
    `select id from graphile_worker.add_job('finalize_call', json_build_object('call_id', gen_random_uuid()), run_at => now() + interval '1 hour')`);
  await t.owner.query(
    `update graphile_worker._private_jobs set locked_by = $2, locked_at = now() - $3::interval, run_at = now() - interval '20 minutes', attempts = 1
      where id = $1`, [job.id, lockedBy, lockedAgo]);
  return job.id as string;
}

const lockOf = async (id: string) =>
  (await t.owner.query('select locked_by from graphile_worker._private_jobs where id = $1', [id])).rows[0] as { locked_by: string | null } | undefined;

test("the sweep unlocks a gone pool's job, which then runs; a live pool's job and a recent lock are left alone", async () => {
  // Setup: the live worker's two runners say they are alive.
  const live = await waitFor(async () => {
    const { rows } = await t.owner.query(`select worker_id from app_private.worker_heartbeats where last_seen_at > now() - interval '1 minute'`);
    return rows.length === 2 && rows.map((r) => r.worker_id as string);
  }, 'both runners heartbeating');
  // A pool killed 10 minutes ago mid-job: its last heartbeat then, its job still locked.
  await t.owner.query(`insert into app_private.worker_heartbeats (worker_id, last_seen_at) values ('pool-killed', now() - interval '10 minutes')`);
  const killed = await lockedJob('pool-killed', '10 minutes');
  // A pool that never wrote a heartbeat (killed before its first), its job locked 10 minutes ago.
  const silent = await lockedJob('pool-silent', '10 minutes');
  // A live pool's job running for 10 minutes: its pool keeps writing.
  const running = await lockedJob(live[0], '10 minutes');
  // A lock a moment old by a pool that writes no heartbeat: it may be mid-job.
  const recent = await lockedJob('pool-recent', '5 seconds');

  // Action
  const r = await sweep({ pool: t.owner });

  // Assertions: the two gone pools' jobs are unlocked and run (finalize_call of a missing call completes).
  expect(r.jobs).toBe(2);
  await waitFor(async () => !(await lockOf(killed)) && !(await lockOf(silent)), 'the gone pools\' jobs ran');
  expect(await lockOf(running)).toEqual({ locked_by: live[0] });
  expect(await lockOf(recent)).toEqual({ locked_by: 'pool-recent' });
  // The gone pool's heartbeat is forgotten; the live ones stay.
  const { rows } = await t.owner.query('select worker_id from app_private.worker_heartbeats order by 1');
  expect(rows.map((x) => x.worker_id).sort()).toEqual([...live].sort());
  expect(WORKER_GONE_SECONDS).toBeGreaterThanOrEqual(180);

  // Tidy: the jobs the test locked in others' names run now.
  await t.owner.query('select graphile_worker.force_unlock_workers(array[$1, $2])', [live[0], 'pool-recent']);
  await waitFor(async () => !(await lockOf(running)) && !(await lockOf(recent)), 'the other jobs ran');
});

test('a runner stopped cleanly forgets its heartbeat', async () => {
  await worker!.stop();
  worker = undefined;
  const { rows } = await t.owner.query('select worker_id from app_private.worker_heartbeats');
  expect(rows).toEqual([]);
});
