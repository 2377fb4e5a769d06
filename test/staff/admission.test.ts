/**
 * Admission of staff requests (docs/staff.md "Admission", src/staff/admission.ts): with
 * STAFF_MAX_RUNNING 1 and STAFF_MAX_QUEUED 1, a second request waits for the first to finish
 * before it runs, a third is refused at once with 503, the error envelope and Retry-After, counted
 * and audited as rejected; a waiting client that leaves gives its place up and runs nothing, even
 * when it left while its token was being looked up; a turn held past its time bound is given back.
 */
import net from 'node:net';
import type pg from 'pg';
import { startStaffGraphql } from '../../src/admin/graphql.js';
import { registry } from '../../src/metrics/registry.js';
import { MAX_PAUSE_MS, StaffAdmission } from '../../src/staff/admission.js';
import { testLog, waitingOnLock } from '../support/harness.js';
import { gqlAt, startStaffEnv, UNPACED, type GqlResult, type StaffEnv } from './support.js';

const COUNT = 'query Count { allCalls { totalCount } }';
let env: StaffEnv;
let viewer: { id: string; token: string };
beforeAll(async () => {
  env = await startStaffEnv({ limits: { maxRunning: 1, maxQueued: 1 } });
  viewer = await env.member('viewer');
  // The schema is built on the first request: not while the tests count statements.
  expect((await env.gql(viewer.token, COUNT)).status).toBe(200);
}, 60_000);
afterAll(async () => env?.close());


async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const m = (await registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return m?.value ?? 0;
}

async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Staff GraphQL backends running a statement now (PostGraphile's pool is named). */
async function staffActive(): Promise<number> {
  const { rows } = await env.owner.query(
    `select count(*)::int n from pg_stat_activity
      where datname = current_database() and application_name = 'switchboard-staff-graphql' and state = 'active'`);
  return rows[0].n;
}

/** Holds an exclusive lock on app.calls, so a staff count of calls waits (running) until released. */
async function lockCalls(): Promise<pg.PoolClient> {
  const c = await env.owner.connect();
  await c.query('begin');
  await c.query('lock table app.calls in access exclusive mode');
  return c;
}

test('one runs, one waits for it, the next is refused with 503, Retry-After, counted and audited', async () => {
  const refusedBefore = await metric('switchboard_staff_requests_refused_total', { reason: 'busy' });
  const auditBefore = (await env.audit()).length;
  const lock = await lockCalls();
  let first: Promise<GqlResult>;
  let second: Promise<GqlResult>;
  try {
    first = env.gql(viewer.token, COUNT);
    await until('the first request to run', async () => (await staffActive()) === 1
      && (await metric('switchboard_staff_requests', { state: 'running' })) === 1);
    second = env.gql(viewer.token, COUNT);
    await until('the second request to queue', async () => (await metric('switchboard_staff_requests', { state: 'queued' })) === 1);
    const third = await env.gql(viewer.token, COUNT);
    expect(third.status).toBe(503);
    expect(third.body).toEqual({
      error: { code: 'staff_busy', message: expect.stringContaining('STAFF_MAX_RUNNING'), details: { retry_after_seconds: expect.any(Number) } },
    });
    const retryAfter = Number(third.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
    expect(third.body.error.details.retry_after_seconds).toBe(retryAfter);
    expect(await metric('switchboard_staff_requests_refused_total', { reason: 'busy' })).toBe(refusedBefore + 1);
    // The queued request has not started: only the first has a statement in the database.
    expect(await staffActive()).toBe(1);
  } finally {
    await lock.query('commit');
    lock.release();
  }
  const [a, b] = await Promise.all([first!, second!]);
  expect(a.body).toEqual({ data: { allCalls: { totalCount: 2 } } });
  expect(b.body).toEqual({ data: { allCalls: { totalCount: 2 } } });
  await until('the turns to be given back', async () => (await metric('switchboard_staff_requests', { state: 'running' })) === 0);
  const rows = (await env.audit()).slice(auditBefore);
  expect(rows).toHaveLength(3);
  // The refused one ended first; the two that ran are ok.
  expect(rows[0]).toMatchObject({ member_id: viewer.id, outcome: 'rejected', http_status: 503, root_fields: [], error_count: 0 });
  expect(rows.slice(1).map((r) => [r.outcome, r.http_status, r.root_fields])).toEqual([['ok', 200, ['allCalls']], ['ok', 200, ['allCalls']]]);
});

test('a waiting client that leaves gives its place up: nothing runs, the next one may wait', async () => {
  const auditBefore = (await env.audit()).length;
  const lock = await lockCalls();
  let first: Promise<GqlResult>;
  let fourth: Promise<GqlResult>;
  try {
    first = env.gql(viewer.token, COUNT);
    await until('the first request to run', async () => (await staffActive()) === 1);
    const leaving = new AbortController();
    const gone = env.gql(viewer.token, 'query Gone { allLocations { totalCount } }', undefined, {}, leaving.signal).catch((e: Error) => e);
    await until('the second request to queue', async () => (await metric('switchboard_staff_requests', { state: 'queued' })) === 1);
    leaving.abort();
    expect(await gone).toMatchObject({ name: 'AbortError' });
    await until('its place to be given up', async () => (await metric('switchboard_staff_requests', { state: 'queued' })) === 0);
    fourth = env.gql(viewer.token, COUNT);
    await until('the next request to queue', async () => (await metric('switchboard_staff_requests', { state: 'queued' })) === 1);
  } finally {
    await lock.query('commit');
    lock.release();
  }
  expect((await first!).status).toBe(200);
  expect((await fourth!).body).toEqual({ data: { allCalls: { totalCount: 2 } } });
  const rows = (await env.audit()).slice(auditBefore);
  expect(rows).toHaveLength(3);
  // It never reached the GraphQL layer: no document, no operation name, no status.
  expect(rows.filter((r) => r.outcome === 'rejected')).toEqual([expect.objectContaining({ http_status: null, root_fields: [], document_sha256: null })]);
  expect(rows.filter((r) => r.outcome === 'ok')).toHaveLength(2);
});

/** Sends a complete staff request on a socket of its own and returns the socket, not waiting for an answer. */
async function sendRaw(url: string, token: string, query: string): Promise<net.Socket> {
  const { hostname, port } = new URL(url);
  const body = JSON.stringify({ query });
  const socket = net.connect(Number(port), hostname);
  await new Promise<void>((r, e) => socket.once('connect', r).once('error', e));
  socket.on('error', () => undefined);
  socket.write(`POST /graphql HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\n`
    + `accept: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  return socket;
}

test('a client that leaves while its token is looked up takes no turn: the next request runs', async () => {
  const auditBefore = (await env.audit()).length;
  // A token never seen (not cached): its look-up waits behind a lock on the staff list.
  const leaver = await env.member('viewer', 'leaver@staff.example.net');
  const lock = await env.owner.connect();
  try {
    await lock.query('begin');
    await lock.query('lock table staff.members in access exclusive mode');
    const socket = await sendRaw(env.staff.url, leaver.token, 'query Left { allLocations { totalCount } }');
    await waitingOnLock(env.owner, { application: 'switchboard-staff' }); // the token look-up
    socket.destroy();
    await new Promise((r) => setTimeout(r, 200)); // the server has seen the connection close
  } finally {
    await lock.query('commit');
    lock.release();
  }
  await until('the look-up to end', async () => (await env.audit()).length > auditBefore);
  const next = await env.gql(viewer.token, COUNT, undefined, {}, AbortSignal.timeout(5000));
  expect(next.body).toEqual({ data: { allCalls: { totalCount: 2 } } });
  expect(await metric('switchboard_staff_requests', { state: 'running' })).toBe(0);
  const rows = (await env.audit()).slice(auditBefore);
  expect(rows.map((r) => [r.member_id, r.outcome, r.http_status, r.root_fields])).toEqual([[leaver.id, 'rejected', null, []], [viewer.id, 'ok', 200, ['allCalls']]]);
});

test('a turn held past its time bound is given back: the connection is closed and the next request runs', async () => {
  const bounded = await startStaffGraphql(env.db.url, '127.0.0.1', 0, { log: testLog, limits: { ...UNPACED, maxRunning: 1, maxQueued: 1 }, turnLimitMs: 1000 });
  // The schema is built on the first request, which may take longer than the bound: built first.
  await until('the schema to be built', async () => (await gqlAt(bounded.url, viewer.token, COUNT).catch(() => null))?.status === 200);
  await bounded.flushAudit();
  const auditBefore = (await env.audit()).length;
  const lock = await lockCalls();
  try {
    const held = gqlAt(bounded.url, viewer.token, 'query Held { allCalls { totalCount } }').catch((e: Error) => e);
    await until('the request to run', async () => (await staffActive()) === 1);
    // Its statement still waits for the lock; its turn is given back after a second all the same.
    expect(await held).toMatchObject({ message: 'fetch failed' });
    const next = await gqlAt(bounded.url, viewer.token, 'query Next { allLocations { totalCount } }', undefined, {}, AbortSignal.timeout(5000));
    expect(next.body).toEqual({ data: { allLocations: { totalCount: 2 } } });
  } finally {
    await lock.query('commit');
    lock.release();
    await bounded.flushAudit();
    await bounded.close();
  }
  const rows = (await env.audit()).slice(auditBefore);
  expect(rows.map((r) => [r.operation_name, r.outcome]).sort()).toEqual([['Held', 'client_gone'], ['Next', 'ok']]);
});

test('turns are paced (STAFF_TIME_SHARE): after a turn held d ms the next starts no sooner than d × (1/share − 1) later', async () => {
  let clock = 0;
  const admission = new StaffAdmission({ maxRunning: 1, maxQueued: 4, timeShare: 0.25 }, () => undefined, () => clock);
  const first = admission.enter()!;
  expect(first.queued).toBe(false);
  clock = 100; // held 100 ms: the next may start at 100 + 100 × 3 = 400
  first.leave();
  const second = admission.enter()!;
  expect(second.queued).toBe(true);
  let started = false;
  void second.ready.then(() => (started = true));
  clock = 399;
  await new Promise((r) => setTimeout(r, 400)); // the pause's timer has fired; the clock says 1 ms to go
  expect([started, admission.stats]).toEqual([false, { running: 0, queued: 1 }]);
  clock = 400;
  await until('the paced turn', async () => started);
  expect(admission.stats).toEqual({ running: 1, queued: 0 });
  second.leave();
  // A free turn that is only paused is taken, even with no room to queue; the next is refused.
  const noQueue = new StaffAdmission({ maxRunning: 1, maxQueued: 0, timeShare: 0.25 }, () => undefined, () => clock);
  const held = noQueue.enter()!;
  clock += 100;
  held.leave();
  const paused = noQueue.enter();
  expect(paused?.queued).toBe(true);
  expect(noQueue.enter()).toBeNull();
  paused!.leave();
  // A long turn (the first request builds the schema) pauses the next at most MAX_PAUSE_MS.
  clock = 800; // the pause after `held` is over
  const long = noQueue.enter()!;
  await long.ready;
  clock += 60_000;
  long.leave();
  const after = noQueue.enter()!;
  let afterStarted = false;
  void after.ready.then(() => (afterStarted = true));
  clock += MAX_PAUSE_MS;
  await until('the turn after a long one', async () => afterStarted);
  after.leave();
  // With a share of 1 nothing is paced.
  const unpaced = new StaffAdmission({ maxRunning: 1, maxQueued: 4, timeShare: 1 }, () => undefined, () => clock);
  unpaced.enter()!.leave();
  expect(unpaced.enter()!.queued).toBe(false);
});
