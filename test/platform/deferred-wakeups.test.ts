/**
 * Voice ingestion defers its wake-ups (src/db/wakeups.ts): the post-call transaction sends no
 * NOTIFY, so ingestion transactions never queue on PostgreSQL's notification lock. Its webhook
 * attempts and notifications are pending rows due at once (the engines' queues); its
 * graphile-worker jobs (finalize_call) wait in app_private.deferred_jobs. After the commit
 * app.flush_deferred_jobs() hands the jobs over and wakes the webhook and notification engines.
 */
import pg from 'pg';
import { callFn, createWorkerPool } from '../../src/db/pools.js';
import { sweep } from '../../src/worker/sweep.js';
import { startTestApi, type TestApi } from '../support/harness.js';
import { postVoice, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation } from './support.js';

let t: TestApi;
let listener: pg.Client;
const heard: string[] = [];

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  listener = new pg.Client({ connectionString: t.db.url });
  await listener.connect();
  listener.on('notification', (n) => heard.push(n.channel));
  await listener.query('LISTEN "jobs:insert"; LISTEN switchboard_webhooks; LISTEN switchboard_notifications');
});
afterAll(async () => {
  await listener.end();
  await t.close();
});

/** A location whose booked call makes two e-mail notifications (lead, booking) and two webhook attempts. */
async function fannedOutLocation(): Promise<VoiceLocation> {
  const loc = await voiceLocation(t.owner);
  await t.owner.query(`update app.notification_settings set email_recipients = '{ops@example.com}' where location_id = $1`, [loc.id]);
  await t.owner.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret) values ($1, 'https://93.184.215.14/h', '{lead.created,booking.created}', app.webhook_new_secret())`,
    [loc.id]);
  return loc;
}

const parked = (jobKey: string) => t.owner.query(
  `select d.task from app_private.deferred_jobs d where d.job_key = $1`, [jobKey]).then((r) => r.rows.map((x) => x.task));
const queued = (jobKey: string) => t.owner.query(
  `select t.identifier from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
    where j.key = $1`, [jobKey]).then((r) => r.rows.map((x) => x.identifier));
/** The location's webhook attempts and notifications that are pending and due now. */
const due = (locId: string) => t.owner.query(
  `select (select count(*)::int from app.webhook_deliveries where location_id = $1 and status = 'pending' and next_attempt_at <= now()) as attempts,
          (select count(*)::int from app.notifications where location_id = $1 and status = 'pending' and next_attempt_at <= now()) as notifications`,
  [locId]).then((r) => r.rows[0]);
/** Notifications are delivered after a commit, in order: a round trip on the listener drains them. */
async function heardSince(mark: number): Promise<string[]> {
  await listener.query('select 1');
  return heard.slice(mark);
}

test('a deferring post-call transaction notifies nobody; its flush wakes both engines once', async () => {
  const loc = await fannedOutLocation();
  const mark = heard.length;
  const r = await callFn<{ finalized: boolean }>(t.owner, 'app.voice_post_call', [voiceFixture('booked', loc), true]);
  expect(r.finalized).toBe(true);
  expect(await heardSince(mark)).toEqual([]);
  // The fan-out is pending rows (the engines' queues), due now.
  expect(await due(loc.id)).toEqual({ attempts: 2, notifications: 2 });

  const mark2 = heard.length;
  await callFn<number>(t.owner, 'app.flush_deferred_jobs', []);
  expect((await heardSince(mark2)).sort()).toEqual(['switchboard_notifications', 'switchboard_webhooks']);
});

test('without deferral the same call notifies in its own transaction (the behaviour deferral removes)', async () => {
  const loc = await fannedOutLocation();
  const mark = heard.length;
  await callFn(t.owner, 'app.voice_post_call', [voiceFixture('booked', loc)]);
  expect(new Set(await heardSince(mark))).toEqual(new Set(['switchboard_notifications', 'switchboard_webhooks']));
  expect(await due(loc.id)).toEqual({ attempts: 2, notifications: 2 });
});

test('POST /api/voice/post-call answers only after the engines were woken', async () => {
  const loc = await fannedOutLocation();
  const mark = heard.length;
  const res = await postVoice(t.baseUrl, 'post-call', voiceFixture('booked', loc));
  expect(res.body.data).toMatchObject({ finalized: true });
  expect(new Set(await heardSince(mark))).toEqual(new Set(['switchboard_notifications', 'switchboard_webhooks']));
  expect(await due(loc.id)).toEqual({ attempts: 2, notifications: 2 });
});

test('a parked job is removed by key (app.dequeue), and the sweep flushes what a dead process left', async () => {
  const loc = await fannedOutLocation();
  await callFn(t.owner, 'app.voice_post_call', [voiceFixture('analysis-missing-call-ended', loc), true]);
  const { rows: [c] } = await t.owner.query(`select id from app.calls where location_id = $1`, [loc.id]);
  expect(await parked(`finalize_call:${c.id}`)).toEqual(['finalize_call']);
  await callFn(t.owner, 'app.dequeue', [`finalize_call:${c.id}`]);
  expect(await parked(`finalize_call:${c.id}`)).toEqual([]);

  const loc2 = await fannedOutLocation();
  await callFn(t.owner, 'app.voice_post_call', [voiceFixture('analysis-missing-call-ended', loc2), true]);
  const { rows: [c2] } = await t.owner.query(`select id from app.calls where location_id = $1`, [loc2.id]);
  expect(await parked(`finalize_call:${c2.id}`)).toEqual(['finalize_call']);
  expect(await queued(`finalize_call:${c2.id}`)).toEqual([]);
  const mark = heard.length;
  await sweep({ pool: t.owner });
  expect(await parked(`finalize_call:${c2.id}`)).toEqual([]);
  expect(await queued(`finalize_call:${c2.id}`)).toEqual(['finalize_call']);
  expect(await heardSince(mark)).toContain('jobs:insert');
});

test('durability: ingestion commits wait for the WAL flush; the flush and the worker pool do not', async () => {
  const setting = (c: pg.PoolClient | pg.Pool, sql: string) => c.query(sql).then((r) => r.rows[0].synchronous_commit);
  // The owner pool (ingestion answers the platform after its commit): the server default, on.
  expect(await setting(t.owner, 'show synchronous_commit')).toBe('on');
  // app.flush_deferred_jobs turns it off for its own transaction only.
  const c = await t.owner.connect();
  try {
    await c.query('begin');
    await c.query('select app.flush_deferred_jobs()');
    expect(await setting(c, 'show synchronous_commit')).toBe('off');
    await c.query('commit');
    expect(await setting(c, 'show synchronous_commit')).toBe('on');
  } finally {
    c.release();
  }
  // A worker pool's claims, records and job bookkeeping: off on every connection.
  const worker = createWorkerPool(t.db.url, 1, 'durability-test');
  try {
    expect(await setting(worker, 'show synchronous_commit')).toBe('off');
  } finally {
    await worker.end();
  }
});
