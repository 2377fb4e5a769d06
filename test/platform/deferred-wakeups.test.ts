/**
 * Voice ingestion defers its wake-ups (src/db/wakeups.ts): the post-call transaction sends no
 * NOTIFY, so ingestion transactions never queue on PostgreSQL's notification lock; its jobs wait
 * in app_private.deferred_jobs until app.flush_deferred_jobs() hands them to graphile-worker with
 * one NOTIFY for the job runners and one for the webhook engines.
 */
import pg from 'pg';
import { callFn } from '../../src/db/pools.js';
import { sweep } from '../../src/worker/sweep.js';
import { startTestApi, type TestApi } from '../support/harness.js';
import { postVoice, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation } from './support.js';

const TWO_SENDS = [{ identifier: 'send_notification' }, { identifier: 'send_notification' }];
let t: TestApi;
let listener: pg.Client;
const heard: string[] = [];

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  listener = new pg.Client({ connectionString: t.db.url });
  await listener.connect();
  listener.on('notification', (n) => heard.push(n.channel));
  await listener.query('LISTEN "jobs:insert"; LISTEN switchboard_webhooks');
});
afterAll(async () => {
  await listener.end();
  await t.close();
});

/** A location whose booked call makes two e-mail notifications (lead, booking: two jobs) and two webhook attempts. */
async function fannedOutLocation(): Promise<VoiceLocation> {
  const loc = await voiceLocation(t.owner);
  await t.owner.query(`update app.notification_settings set email_recipients = '{ops@example.com}' where location_id = $1`, [loc.id]);
  await t.owner.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret) values ($1, 'https://93.184.215.14/h', '{lead.created,booking.created}', app.webhook_new_secret())`,
    [loc.id]);
  return loc;
}

const parked = (locId: string) => t.owner.query(
  `select d.task, d.job_key from app_private.deferred_jobs d where d.payload ->> 'location_id' = $1 order by d.id`, [locId]).then((r) => r.rows);
const queued = (locId: string) => t.owner.query(
  `select t.identifier from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
    where j.payload ->> 'location_id' = $1`, [locId]).then((r) => r.rows);
/** Notifications are delivered after a commit, in order: a round trip on the listener drains them. */
async function heardSince(mark: number): Promise<string[]> {
  await listener.query('select 1');
  return heard.slice(mark);
}

test('a deferring post-call transaction parks its jobs and notifies nobody; the flush hands them over with one NOTIFY each', async () => {
  const loc = await fannedOutLocation();
  const mark = heard.length;
  const r = await callFn<{ finalized: boolean }>(t.owner, 'app.voice_post_call', [voiceFixture('booked', loc), true]);
  expect(r.finalized).toBe(true);
  expect(await heardSince(mark)).toEqual([]);
  expect((await parked(loc.id)).map((j) => j.task)).toEqual(['send_notification', 'send_notification']);
  expect(await queued(loc.id)).toEqual([]);
  // The attempt itself is a pending row (the engine's queue), due now.
  const { rows: [d] } = await t.owner.query(
    `select count(*)::int n from app.webhook_deliveries where location_id = $1 and status = 'pending' and next_attempt_at <= now()`, [loc.id]);
  expect(d.n).toBe(2);

  const mark2 = heard.length;
  expect(await callFn<number>(t.owner, 'app.flush_deferred_jobs', [])).toBeGreaterThanOrEqual(2);
  expect(await parked(loc.id)).toEqual([]);
  expect(await queued(loc.id)).toEqual(TWO_SENDS);
  expect((await heardSince(mark2)).sort()).toEqual(['jobs:insert', 'switchboard_webhooks']);
});

test('without deferral the same call notifies in its own transaction (the behaviour deferral removes)', async () => {
  const loc = await fannedOutLocation();
  const mark = heard.length;
  await callFn(t.owner, 'app.voice_post_call', [voiceFixture('booked', loc)]);
  expect(new Set(await heardSince(mark))).toEqual(new Set(['jobs:insert', 'switchboard_webhooks']));
  expect(await parked(loc.id)).toEqual([]);
  expect(await queued(loc.id)).toEqual(TWO_SENDS);
});

test('POST /api/voice/post-call answers only after its jobs are in the queue', async () => {
  const loc = await fannedOutLocation();
  const res = await postVoice(t.baseUrl, 'post-call', voiceFixture('booked', loc));
  expect(res.body.data).toMatchObject({ finalized: true });
  expect(await parked(loc.id)).toEqual([]);
  expect(await queued(loc.id)).toEqual(TWO_SENDS);
});

test('a parked job is removed by key (app.dequeue), and the sweep flushes what a dead process left', async () => {
  const loc = await fannedOutLocation();
  const ended = voiceFixture('analysis-missing-call-ended', loc);
  await callFn(t.owner, 'app.voice_post_call', [ended, true]);
  const { rows: [c] } = await t.owner.query(`select id from app.calls where location_id = $1`, [loc.id]);
  expect(await t.owner.query(`select 1 from app_private.deferred_jobs where job_key = $1`, [`finalize_call:${c.id}`]).then((r) => r.rowCount)).toBe(1);
  await callFn(t.owner, 'app.dequeue', [`finalize_call:${c.id}`]);
  expect(await t.owner.query(`select 1 from app_private.deferred_jobs where job_key = $1`, [`finalize_call:${c.id}`]).then((r) => r.rowCount)).toBe(0);

  const loc2 = await fannedOutLocation();
  await callFn(t.owner, 'app.voice_post_call', [voiceFixture('booked', loc2), true]);
  expect(await parked(loc2.id)).toHaveLength(2);
  await sweep({ pool: t.owner });
  expect(await parked(loc2.id)).toEqual([]);
  expect(await queued(loc2.id)).toEqual(TWO_SENDS);
});
