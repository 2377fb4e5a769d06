/**
 * The demo seeder's last step after a history (docs/performance.md, "Seeding after a history").
 * Its delete of the customers no seeded call picked fires the `on delete set null (customer_id)`
 * actions of calls, leads and bookings once per customer. Planned on statistics that predate the
 * new location (analysed while only the history's location had rows), each action read every row
 * of the new location through a location-led index: tuples fetched grew with customers × rows.
 *
 * Here the history is one small location, analysed as the CLI does; the second location is seeded
 * and finished in one transaction, so no autovacuum can refresh the statistics in between (the
 * worst case, deterministic). The per-transaction counters of the three referencing tables must
 * stay linear in the location's rows (without the fix: about 2,500,000 fetched).
 *
 * Retention's deletes have the same shape: each deleted event runs the `on delete cascade` actions
 * of webhook_deliveries and notifications, and for a location the statistics do not know each
 * action walked the location's deliveries and notifications.
 */
import pg from 'pg';
import { callFn } from '../../src/db/pools.js';
import { useTestDatabase } from '../support/db.js';
import { createLocation, type TestLocation } from '../support/harness.js';

const CALLS = 3000;
const db = useTestDatabase({ pool: true });
let history: TestLocation;
let second: TestLocation;

beforeAll(async () => {
  history = await createLocation(db.owner);
  second = await createLocation(db.owner);
  await callFn(db.owner, 'admin.demo_seed_prepare', [history.slug, 210]);
  await callFn(db.owner, 'admin.demo_seed_calls', [history.slug, 300, 30]);
  await callFn(db.owner, 'admin.demo_seed_finish', [history.slug]);
  // The history's deliveries and notifications: the statistics know only its location.
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    await liveRows(c, history.id, 1000);
    await c.query(`insert into app.notification_log (location_id, notification_id, status)
                   select location_id, id, 'sent' from app.notifications where location_id = $1`, [history.id]);
    await c.query('commit');
  } finally {
    c.release();
  }
  await db.owner.query('analyze app.calls, app.customers, app.leads, app.bookings, app.events, app.webhook_deliveries, app.notifications, app.notification_log');
});

/** `n` recent events of the location, each with two settled deliveries and two sent notifications. */
async function liveRows(c: pg.PoolClient, loc: string, n: number): Promise<void> {
  await c.query(
    `with e as (
       insert into app.events (location_id, type, data) select $1, 'webhook.test', '{}' from generate_series(1, $2::int) returning id
     ), d as (
       insert into app.webhook_deliveries (location_id, event_id, event, url, status)
       select $1, e.id, 'webhook.test', 'https://hooks.example.com/w', 'delivered' from e, generate_series(1, 2)
     )
     insert into app.notifications (location_id, event_id, event, channel, provider, recipient, status)
     select $1, e.id, 'webhook.test', 'email', 'smtp', 'owner@example.com', 'sent' from e, generate_series(1, 2)`,
    [loc, n]);
}

// Heap tuples fetched in this transaction through the indexes of the three tables (an index scan
// counts its fetches against the index; idx_tup_fetch of pg_stat_user_tables sums the same).
const FETCHED = `select coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)::bigint n
                   from pg_index i where i.indrelid = any (array['app.calls', 'app.leads', 'app.bookings']::regclass[])`;

test('finishing a seed into a location the statistics do not know reads rows linearly, not per deleted customer', async () => {
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    await callFn(c, 'admin.demo_seed_prepare', [second.slug, Math.ceil(CALLS * 0.7)]);
    await callFn(c, 'admin.demo_seed_calls', [second.slug, CALLS, 30]);
    const unused = Number((await c.query(
      `select count(*) n from app.customers cu where cu.location_id = $1
          and not exists (select 1 from app.calls k where k.customer_id = cu.id)`, [second.id])).rows[0].n);
    const before = Number((await c.query(FETCHED)).rows[0].n);
    const summary = await callFn<{ calls: number; leads: number; bookings: number; customers: number }>(c, 'admin.demo_seed_finish', [second.slug]);
    const fetched = Number((await c.query(FETCHED)).rows[0].n) - before;

    // The case is the one that used to be slow: hundreds of customers to delete, thousands of rows.
    expect(unused).toBeGreaterThan(200);
    expect(summary.calls).toBe(CALLS);
    expect(summary.leads).toBeGreaterThan(CALLS / 3);
    // Linear: at most a few fetches per row of the location (was unused × rows, ~2.5 million).
    expect(fetched).toBeLessThan(3 * (CALLS + summary.leads + summary.bookings));

    // The result is unchanged: every customer left has calls and their count, none without.
    const check = (await c.query(
      `select count(*) filter (where cu.call_count = 0) zero,
              count(*) filter (where cu.call_count <> (select count(*) from app.calls k where k.customer_id = cu.id)) wrong,
              count(*) n
         from app.customers cu where cu.location_id = $1`, [second.id])).rows[0];
    expect({ zero: Number(check.zero), wrong: Number(check.wrong), n: Number(check.n) })
      .toEqual({ zero: 0, wrong: 0, n: summary.customers });
    expect(Number(check.n) + unused).toBe(Math.ceil(CALLS * 0.7));
    await c.query('commit');
  } finally {
    c.release();
  }
}, 120_000);

test('retention deleting the old events of a location the statistics do not know reads no deliveries per event', async () => {
  const third = await createLocation(db.owner);
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    await liveRows(c, third.id, 2000);
    await c.query(
      `insert into app.events (location_id, type, data, created_at)
       select $1, 'webhook.test', '{}', now() - interval '40 days' - g * interval '1 minute' from generate_series(1, 300) g`, [third.id]);
    const fetched = `select coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)::bigint n
                       from pg_index i where i.indrelid = any (array['app.webhook_deliveries', 'app.notifications']::regclass[])`;
    const before = Number((await c.query(fetched)).rows[0].n);
    const pruned = Number((await c.query(`select app.retention_prune('events', 30, 300) n`)).rows[0].n);
    const read = Number((await c.query(fetched)).rows[0].n) - before;
    expect(pruned).toBe(300);
    // Without generic plans: 300 events × (4,000 deliveries + 4,000 notifications) = 2.4 million.
    expect(read).toBeLessThan(1000);
    const left = (await c.query(
      `select (select count(*) from app.events where location_id = $1)::int events,
              (select count(*) from app.webhook_deliveries where location_id = $1)::int deliveries`, [third.id])).rows[0];
    expect(left).toEqual({ events: 2000, deliveries: 4000 });

    // Notifications: each deleted one cascades to notification_log (4,000 rows of the location).
    await c.query(`insert into app.notification_log (location_id, notification_id, status)
                   select location_id, id, 'sent' from app.notifications where location_id = $1`, [third.id]);
    await c.query(
      `insert into app.notifications (location_id, event_id, event, channel, provider, recipient, status, created_at)
       select $1, (select id from app.events where location_id = $1 limit 1), 'webhook.test', 'email', 'smtp',
              'owner@example.com', 'sent', now() - interval '40 days' from generate_series(1, 300)`, [third.id]);
    const logFetched = `select coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)::bigint n
                          from pg_index i where i.indrelid = 'app.notification_log'::regclass`;
    const logBefore = Number((await c.query(logFetched)).rows[0].n);
    expect(Number((await c.query(`select app.retention_prune('notifications', 30, 300) n`)).rows[0].n)).toBe(300);
    expect(Number((await c.query(logFetched)).rows[0].n) - logBefore).toBeLessThan(1000); // without generic plans: 20,000 here (custom plans walking the 4,000 rows)
    expect(Number((await c.query('select count(*) n from app.notification_log where location_id = $1', [third.id])).rows[0].n)).toBe(4000);
    // The caller's plan mode is back once the delete is done.
    expect((await c.query(`select current_setting('plan_cache_mode') m`)).rows[0].m).toBe('auto');
    await c.query('rollback');
  } finally {
    c.release();
  }
}, 120_000);
