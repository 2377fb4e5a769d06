/**
 * The worker's connections to the embedded cluster give way to intake's (src/db/backend-priority.ts):
 * checked on the real backends of the test cluster, through /proc. The service's wiring (the
 * worker pool of `npm start` on the embedded cluster) is checked in test/service/start.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import pg from 'pg';
import { lowerBackendPriority, lowerPoolPriority, parentPid } from '../../src/db/backend-priority.js';
import { createApiPool, createWorkerPool } from '../../src/db/pools.js';
import type { Logger } from '../../src/log.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

let db: TestDatabase;
const pools: pg.Pool[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await db.drop();
});

/** The backend serving one checkout of `pool`, and the postmaster it was forked from. */
async function backendOf(pool: pg.Pool): Promise<{ pid: number; postmaster: number | null }> {
  const client = await pool.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    return { pid: rows[0].pid, postmaster: parentPid(rows[0].pid) };
  } finally {
    client.release();
  }
}

/** A backend's nice value and its autogroup's (null where the kernel has no autogroups). */
function weights(pid: number): { nice: number; autogroup: number | null } {
  const group = fs.existsSync(`/proc/${pid}/autogroup`) ? fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8') : null;
  return { nice: os.getPriority(pid), autogroup: group === null ? null : Number(/nice (-?\d+)/.exec(group)![1]) };
}

function capturingLog(): { log: Logger; warnings: unknown[] } {
  const warnings: unknown[] = [];
  const log = { warn: (obj: unknown) => warnings.push(obj) } as unknown as Logger;
  return { log, warnings };
}

// The test cluster is local unless TEST_DATABASE_URL names another host's server.
const local = async () => {
  const probe = createApiPool(db.url, 1);
  pools.push(probe);
  const { postmaster } = await backendOf(probe);
  return postmaster !== null && /postgres/.test(fs.readFileSync(`/proc/${postmaster}/cmdline`, 'utf8'));
};

test('a worker pool on the local cluster connects at nice 10; the API pool keeps nice 0', async () => {
  if (!(await local())) return;
  const api = createApiPool(db.url, 1);
  const worker = createWorkerPool(db.url, 1);
  pools.push(api, worker);
  const probe = await backendOf(api);
  const { log, warnings } = capturingLog();
  lowerPoolPriority(worker, () => probe.postmaster, 10, log);

  const w = await backendOf(worker);
  expect(w.postmaster).toBe(probe.postmaster);
  const lowered = weights(w.pid);
  expect(lowered.nice).toBe(10);
  if (lowered.autogroup !== null) expect(lowered.autogroup).toBe(10);
  // Intake's connections keep the default weight.
  expect(weights(probe.pid).nice).toBe(0);
  expect(warnings).toEqual([]);
});

test('nothing but a backend of the given postmaster is touched; WORKER_DB_NICE=0 changes nothing', async () => {
  if (!(await local())) return;
  const pool = createWorkerPool(db.url, 1);
  pools.push(pool);
  const { pid, postmaster } = await backendOf(pool);

  // This test's own process is not a child of the postmaster; nor is the backend of another one.
  expect(lowerBackendPriority(process.pid, postmaster!, 10)).toBe('not-ours');
  expect(os.getPriority(process.pid)).toBe(0);
  expect(lowerBackendPriority(pid, process.pid, 10)).toBe('not-ours');
  expect(weights(pid).nice).toBe(0);

  // Off: no listener, so new connections keep nice 0 and nothing is logged.
  const off = createWorkerPool(db.url, 1);
  pools.push(off);
  const { log, warnings } = capturingLog();
  lowerPoolPriority(off, () => postmaster, 0, log);
  expect(weights((await backendOf(off)).pid).nice).toBe(0);
  expect(warnings).toEqual([]);
});

test('a cluster that is not ours (no postmaster pid) is left alone, with one warning', async () => {
  const pool = createWorkerPool(db.url, 2);
  pools.push(pool);
  const { log, warnings } = capturingLog();
  lowerPoolPriority(pool, () => null, 10, log);
  const clients = await Promise.all([pool.connect(), pool.connect()]);
  const pids = await Promise.all(clients.map(async (c) => (await c.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid));
  clients.forEach((c) => c.release());
  if (await local()) for (const pid of pids) expect(weights(pid).nice).toBe(0);
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toMatchObject({ outcome: 'not-ours', nice: 10 });
});
