/**
 * Retention (DELIVERY_RETENTION_DAYS): settled delivery attempts, notifications with their log,
 * and events none of whose deliveries or notifications remain are pruned once older than the
 * window, in batches; recent and unsettled rows stay. Driven through the prune_deliveries task.
 */
import pg from 'pg';
import { callFn } from '../../src/db/pools.js';
import { loadConfig } from '../../src/config.js';
import { loadTasks } from '../../src/worker/index.js';
import { pruneDeliveries } from '../../src/webhooks/retention.js';
import { createLocation, startTestApi, testLog, type TestApi } from '../support/harness.js';
import { emit } from './support.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({ DELIVERY_RETENTION_DAYS: '30' });
});
afterAll(() => t.close());

async function endpoint(locationId: string): Promise<string> {
  const { rows } = await t.owner.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret)
     values ($1, 'https://hooks.example.com/w', '{spam.blocked}', app.webhook_new_secret()) returning id`, [locationId]);
  return rows[0].id;
}

/**
 * An event with one delivery to `ep` in `status`, everything created `age` ago. lead.updated: no
 * endpoint here subscribes to it and it notifies nobody by default, so only these rows exist.
 */
async function eventWith(locationId: string, ep: string, age: string, status: string | null): Promise<string> {
  const id = await emit(t.owner, locationId, 'lead.updated', { id: 'x' });
  await t.owner.query(`update app.events set created_at = now() - $2::interval where id = $1`, [id, age]);
  if (status) {
    await t.owner.query(
      `insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, status, url, created_at)
       values ($1, $2, $3, 'lead.created', $4, 'https://hooks.example.com/w', now() - $5::interval)`, [locationId, id, ep, status, age]);
  }
  return id;
}

/** A notification of an event, `age` old, in `status`, with two log rows. */
async function notificationOf(locationId: string, eventId: string | null, age: string, status: string): Promise<string> {
  const { rows } = await t.owner.query(
    `insert into app.notifications (location_id, event_id, event, channel, provider, recipient, status, created_at)
     values ($1, $2, 'lead.created', 'email', 'smtp', 'o@example.com', $3, now() - $4::interval) returning id`, [locationId, eventId, status, age]);
  await t.owner.query(
    `insert into app.notification_log (location_id, notification_id, status, at)
     values ($1, $2, 'failed', now() - $3::interval), ($1, $2, $4, now() - $3::interval)`, [locationId, rows[0].id, age, status === 'pending' ? 'failed' : status]);
  return rows[0].id;
}

const exists = async (table: string, id: string) =>
  (await t.owner.query(`select 1 from ${table} where id = $1`, [id])).rowCount === 1;
const countOf = async (sql: string, params: unknown[]) => (await t.owner.query(sql, params)).rows[0].n as number;

test('old settled rows go; recent and unsettled ones stay; events go only when nothing of theirs remains', async () => {
  const loc = await createLocation(t.owner);
  const ep = await endpoint(loc.id);
  await t.owner.query(`delete from app.webhook_deliveries where location_id = $1`, [loc.id]);

  const oldDelivered = await eventWith(loc.id, ep, '31 days', 'delivered');
  const oldDead = await eventWith(loc.id, ep, '40 days', 'dead');
  const oldPending = await eventWith(loc.id, ep, '45 days', 'pending'); // held by a paused endpoint
  const recent = await eventWith(loc.id, ep, '29 days', 'delivered');
  const oldBare = await eventWith(loc.id, ep, '31 days', null); // no endpoint was subscribed
  const oldNotified = await eventWith(loc.id, ep, '31 days', 'delivered');
  const sentNote = await notificationOf(loc.id, oldNotified, '31 days', 'sent');
  const oldWaiting = await eventWith(loc.id, ep, '31 days', 'delivered');
  const pendingNote = await notificationOf(loc.id, oldWaiting, '31 days', 'pending');
  const recentNote = await notificationOf(loc.id, recent, '2 days', 'skipped');
  const operational = await notificationOf(loc.id, null, '60 days', 'failed'); // no event (e.g. endpoint health)
  // An old event re-sent recently (manual retry): the new attempt keeps it.
  const retried = await eventWith(loc.id, ep, '35 days', 'dead');
  await t.owner.query(
    `insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url)
     values ($1, $2, $3, 'lead.created', 7, 'delivered', 'https://hooks.example.com/w')`, [loc.id, retried, ep]);

  // Only the rows made here exist (no fan-out deliveries or notifications from the emits).
  expect(await countOf(`select count(*)::int as n from app.notifications where location_id = $1`, [loc.id])).toBe(4);
  expect(await countOf(`select count(*)::int as n from app.webhook_deliveries where location_id = $1`, [loc.id])).toBe(8);
  const result = await pruneDeliveries({ cfg: t.cfg, pool: t.owner });
  expect(result).toMatchObject({ deliveries: 5, notifications: 2 });

  for (const id of [oldDelivered, oldDead, oldBare, oldNotified]) expect([id, await exists('app.events', id)]).toEqual([id, false]);
  for (const id of [oldPending, recent, oldWaiting, retried]) expect([id, await exists('app.events', id)]).toEqual([id, true]);
  expect(result.events).toBe(4);
  const left = async (eventId: string) =>
    (await t.owner.query(`select status from app.webhook_deliveries where event_id = $1 order by status`, [eventId])).rows.map((r) => r.status);
  expect(await left(oldPending)).toEqual(['pending']);
  expect(await left(recent)).toEqual(['delivered']);
  expect(await left(oldWaiting)).toEqual([]); // its old delivery went; the event waits for its notification
  expect(await left(retried)).toEqual(['delivered']); // the old dead attempt went, the recent one stayed
  expect(await exists('app.notifications', sentNote)).toBe(false);
  expect(await exists('app.notifications', operational)).toBe(false);
  expect(await exists('app.notifications', pendingNote)).toBe(true);
  expect(await exists('app.notifications', recentNote)).toBe(true);
  expect(await countOf(`select count(*)::int as n from app.notification_log where notification_id = any ($1::uuid[])`, [[sentNote, operational]])).toBe(0);
  expect(await countOf(`select count(*)::int as n from app.notification_log where notification_id = any ($1::uuid[])`, [[pendingNote, recentNote]])).toBe(4);

  // Once the notification settles, the next run takes the event too.
  await t.owner.query(`update app.notifications set status = 'sent' where id = $1`, [pendingNote]);
  expect(await pruneDeliveries({ cfg: t.cfg, pool: t.owner })).toMatchObject({ deliveries: 0, notifications: 1, events: 1 });
  expect(await exists('app.events', oldWaiting)).toBe(false);
  // Nothing left to do: one statement per kind.
  expect(await pruneDeliveries({ cfg: t.cfg, pool: t.owner })).toEqual({ deliveries: 0, notifications: 0, events: 0, batches: 3 });
});

test('work goes in batches of at most batch_size rows per statement, across locations', async () => {
  const locs = [await createLocation(t.owner), await createLocation(t.owner)];
  for (const loc of locs) {
    const ep = await endpoint(loc.id);
    for (let i = 0; i < 3; i++) await eventWith(loc.id, ep, `${50 + i} days`, 'failed');
  }
  const other = await countOf(`select count(*)::int as n from app.webhook_deliveries where created_at < now() - interval '30 days' and status <> 'pending' and location_id <> all ($1::uuid[])`, [locs.map((l) => l.id)]);
  expect(other).toBe(0);
  // One statement deletes at most the batch…
  expect(await callFn(t.owner, 'app.retention_prune', ['deliveries', 30, 4])).toBe(4);
  // …and the loop calls again until a batch comes back short: the 2 left, then 0.
  const r = await pruneDeliveries({ cfg: t.cfg, pool: t.owner }, { batch: 2 });
  expect(r.deliveries).toBe(2);
  expect(r.events).toBe(6);
  // deliveries: 2 then 0; notifications: 0; events: 2, 2, 2, 0.
  expect(r.batches).toBe(2 + 1 + 4);
  await expect(callFn(t.owner, 'app.retention_prune', ['everything', 30, 10])).rejects.toThrow(/Unknown retention kind/);
});

test('a row locked by a live transaction is skipped, not waited on', async () => {
  const loc = await createLocation(t.owner);
  const ep = await endpoint(loc.id);
  const ev = await eventWith(loc.id, ep, '31 days', 'delivered');
  const holder = new pg.Client({ connectionString: t.db.url });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query(`select 1 from app.webhook_deliveries where event_id = $1 for update`, [ev]);
    // An event whose row a writer holds (e.g. a fan-out inserting a delivery: FOR KEY SHARE).
    const bare = await eventWith(loc.id, ep, '31 days', null);
    await holder.query(`select 1 from app.events where id = $1 for key share`, [bare]);
    const r = await pruneDeliveries({ cfg: t.cfg, pool: t.owner });
    expect(r).toMatchObject({ deliveries: 0, events: 0 });
    expect(await exists('app.events', ev)).toBe(true);
    expect(await exists('app.events', bare)).toBe(true);
    await holder.query('rollback');
    expect(await pruneDeliveries({ cfg: t.cfg, pool: t.owner })).toMatchObject({ deliveries: 1, events: 2 });
  } finally {
    await holder.end();
  }
});

test('the worker runs it hourly as prune_deliveries; DELIVERY_RETENTION_DAYS defaults to 30 and is validated', async () => {
  const tasks = await loadTasks({ cfg: t.cfg, log: testLog, pool: t.owner });
  expect(typeof tasks.prune_deliveries).toBe('function');
  const loc = await createLocation(t.owner);
  const ep = await endpoint(loc.id);
  const ev = await eventWith(loc.id, ep, '31 days', 'dead');
  await tasks.prune_deliveries!({}, {} as never);
  expect(await exists('app.events', ev)).toBe(false);
  const { readFileSync } = await import('node:fs');
  expect(readFileSync(new URL('../../src/worker/index.ts', import.meta.url), 'utf8')).toMatch(/'17 \* \* \* \* prune_deliveries'/);
  expect(loadConfig({}).DELIVERY_RETENTION_DAYS).toBe(30);
  expect(loadConfig({ DELIVERY_RETENTION_DAYS: '7' }).DELIVERY_RETENTION_DAYS).toBe(7);
  expect(() => loadConfig({ DELIVERY_RETENTION_DAYS: '0' })).toThrow(/DELIVERY_RETENTION_DAYS/);
  expect(() => loadConfig({ DELIVERY_RETENTION_DAYS: 'month' })).toThrow(/DELIVERY_RETENTION_DAYS/);
});
