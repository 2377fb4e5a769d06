/**
 * The staff GraphQL in a child process (docs/staff.md "Its own process", STAFF_GRAPHQL_PROCESS):
 * it answers through the main thread's admin listener, every thread of the child runs at the
 * lowered nice (V8's helpers included, which a worker thread cannot lower), the child names itself,
 * and its admission refusals are counted in the main process's metrics.
 */
import fs from 'node:fs';
import os from 'node:os';
import type pg from 'pg';
import { startStaffGraphqlThread } from '../../src/admin/graphql-thread.js';
import type { StaffServer } from '../../src/admin/graphql.js';
import { DEFAULT_STAFF_LIMITS } from '../../src/staff/access.js';
import { registry } from '../../src/metrics/registry.js';
import { testLog, waitFor, waitingOnLock } from '../support/harness.js';
import { gqlAt, startStaffEnv, type StaffEnv } from './support.js';

let env: StaffEnv;
let child: StaffServer;
let viewer: { id: string; token: string };
const NICE = 7;

beforeAll(async () => {
  env = await startStaffEnv();
  viewer = await env.member('viewer');
  child = await startStaffGraphqlThread(env.db.url, '127.0.0.1', 0, {
    log: testLog, logLevel: 'silent', limits: { ...DEFAULT_STAFF_LIMITS, maxRunning: 1, maxQueued: 0, timeShare: 1 }, heapMb: 256, threadNice: NICE, childProcess: true,
  });
}, 120_000);
afterAll(async () => {
  await child?.close();
  await env?.close();
});

const stat = (p: string) => {
  const s = fs.readFileSync(p, 'utf8');
  return s.slice(s.lastIndexOf(')') + 2).split(' ');
};

/** The staff children of this process (their parent is us, their script src/staff/thread.ts). */
function staffChildren(): number[] {
  return fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number).filter((pid) => {
    try {
      return Number(stat(`/proc/${pid}/stat`)[1]) === process.pid && fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('staff/thread');
    } catch {
      return false;
    }
  });
}
function staffChild(): number {
  const pids = staffChildren();
  expect(pids).toHaveLength(1);
  return pids[0];
}

test('the child starts with the first staff request, not with the listener', () => {
  expect(staffChildren()).toHaveLength(0);
});

test('answers through the admin listener, from a child process whose every thread runs at the lowered nice', async () => {
  const r = await gqlAt(child.url, viewer.token, '{ allCalls { totalCount } }');
  expect(r.body).toEqual({ data: { allCalls: { totalCount: 2 } } });
  const pid = staffChild();
  const tasks = fs.readdirSync(`/proc/${pid}/task`);
  expect(tasks.length).toBeGreaterThan(4); // main, libuv's pool, V8's helpers
  expect(tasks.map((t) => Number(stat(`/proc/${pid}/task/${t}/stat`)[16]))).toEqual(tasks.map(() => NICE));
  expect(fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()).toBe('staff-graphql');
  // A session, hence a scheduling group (Linux autogroup), of its own, lowered as a whole.
  expect(Number(stat(`/proc/${pid}/stat`)[3])).toBe(pid);
  if (fs.existsSync(`/proc/${pid}/autogroup`)) {
    const group = fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8').trim();
    expect(group).toMatch(new RegExp(` nice ${NICE}$`));
    expect(group.split(' ')[0]).not.toBe(fs.readFileSync('/proc/self/autogroup', 'utf8').split(' ')[0]);
  }
  // This process's own main thread keeps its priority.
  expect(Number(stat(`/proc/${process.pid}/stat`)[16])).toBe(os.getPriority());
  expect(os.getPriority()).toBeLessThan(NICE);
});

test('a refusal for want of a turn in the child is a 503 counted by the main process', async () => {
  const counted = async () => (await registry.getSingleMetric('switchboard_staff_requests_refused_total')?.get())?.values.find((v) => v.labels.reason === 'busy')?.value ?? 0;
  const before = await counted();
  const lock: pg.PoolClient = await env.owner.connect();
  try {
    await lock.query('begin');
    await lock.query('lock table app.calls in access exclusive mode');
    const first = gqlAt(child.url, viewer.token, '{ allCalls { totalCount } }');
    await waitingOnLock(env.owner, { application: 'switchboard-staff-graphql' }); // the first request runs
    const second = await gqlAt(child.url, viewer.token, '{ allCalls { totalCount } }');
    expect(second.status).toBe(503);
    expect(second.body.error.code).toBe('staff_busy');
    expect(second.headers.get('retry-after')).toMatch(/^\d+$/);
    await lock.query('commit');
    expect((await first).status).toBe(200);
  } finally {
    await lock.query('rollback').catch(() => undefined);
    lock.release();
  }
  // The child sends the count to the main process over IPC.
  for (let i = 0; (await counted()) < before + 1 && i < 100; i++) await new Promise((r) => setTimeout(r, 50));
  expect(await counted()).toBe(before + 1);
});

test('a child that died is started again by the next staff request, which it answers', async () => {
  const pid = staffChild();
  process.kill(pid, 'SIGKILL');
  // Reaped (and its exit seen by the main thread, in the same callback) before the next request.
  await waitFor(async () => !fs.existsSync(`/proc/${pid}`), 'the killed child reaped', 10_000);
  const r = await gqlAt(child.url, viewer.token, '{ allCalls { totalCount } }');
  expect(r.body).toEqual({ data: { allCalls: { totalCount: 2 } } });
  const again = staffChild();
  expect(again).not.toBe(pid);
});
