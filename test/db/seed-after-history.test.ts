/**
 * Bulk paths after a history (docs/performance.md, "Seeding after a history", "Seeding in batches").
 *
 * The demo seeder's last step used to update every seeded customer's call statistics and delete
 * the customers no call picked; that delete fired the `on delete set null (customer_id)` actions
 * of calls, leads and bookings once per customer, and on statistics that predated the location
 * each action read the location's rows. A batch now writes its customers with their statistics,
 * their calls, leads and bookings in one statement: no row is updated or deleted, however stale
 * the statistics. Here the history is one small location, analysed as the CLI does; the second
 * location is seeded in one transaction, so no autovacuum refreshes the statistics meanwhile.
 *
 * Retention's deletes have the shape the old delete had: each deleted event runs the `on delete
 * cascade` actions of webhook_deliveries and notifications, and for a location the statistics do
 * not know each action walked the location's deliveries and notifications.
 */
import pg from 'pg';
import { useTestDatabase } from '../support/db.js';
import { createLocation, seedDemo, type TestLocation } from '../support/harness.js';

const CALLS = 3000;
const db = useTestDatabase({ pool: true });
let history: TestLocation;
let second: TestLocation;

beforeAll(async () => {
  history = await createLocation(db.owner);
  second = await createLocation(db.owner);
  await seedDemo(db.owner, history.slug, 300);
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

const SEEDED = ['app.customers', 'app.calls', 'app.leads', 'app.bookings'];
// This transaction's counters of the four tables: rows inserted, updated (HOT or not), deleted,
// and heap tuples fetched through their indexes.
const COUNTERS = `select coalesce(sum(pg_stat_get_xact_tuples_inserted(r)), 0)::bigint inserted,
                         coalesce(sum(pg_stat_get_xact_tuples_updated(r)), 0)::bigint updated,
                         coalesce(sum(pg_stat_get_xact_tuples_deleted(r)), 0)::bigint deleted,
                         (select coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)
                            from pg_index i where i.indrelid = any ($1::regclass[]))::bigint fetched
                    from unnest($1::regclass[]) r`;
const counters = async (c: pg.PoolClient) =>
  Object.fromEntries(Object.entries((await c.query(COUNTERS, [SEEDED])).rows[0]).map(([k, v]) => [k, Number(v)])) as Record<string, number>;

test('seeding a location the statistics do not know writes each row once and reads rows linearly', async () => {
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    const before = await counters(c);
    const summary = await seedDemo(c, second.slug, CALLS);
    const after = await counters(c);
    const delta = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));

    expect(summary.calls).toBe(CALLS);
    expect(summary.customers).toBe(Math.ceil(CALLS * 0.7));
    expect(summary.leads).toBeGreaterThan(CALLS / 3);
    expect(summary.bookings).toBeGreaterThan(CALLS / 10);
    // Each row written once: no statistics update, no delete of unpicked customers (the old last
    // step updated every customer and deleted about a quarter of them).
    expect(delta).toMatchObject({ updated: 0, deleted: 0,
      inserted: summary.calls + summary.customers + summary.leads + summary.bookings });
    // Linear: a few fetches per row written (foreign-key checks, the rollup's join, the summary's
    // counts: 5.7 per row here, 5.3 with four times the calls); the old delete's actions: ~2.5 million.
    expect(delta.fetched).toBeLessThan(8 * delta.inserted);

    // Every customer has calls, and the statistics it was written with are its calls'.
    const check = (await c.query(
      `select count(*) filter (where cu.call_count = 0) zero,
              count(*) filter (where (cu.call_count, cu.first_call_at, cu.last_call_at) is distinct from
                               (select (count(*)::int, min(k.started_at), max(k.started_at)) from app.calls k where k.customer_id = cu.id)) wrong,
              count(*) n
         from app.customers cu where cu.location_id = $1`, [second.id])).rows[0];
    expect({ zero: Number(check.zero), wrong: Number(check.wrong), n: Number(check.n) })
      .toEqual({ zero: 0, wrong: 0, n: summary.customers });
    // Leads are the calls that produced one, bookings the booked calls with a date.
    const shape = (await c.query(
      `select (select count(*) from app.calls where location_id = $1 and outcome in ('booked', 'lead', 'transferred'))::int leads,
              (select count(*) from app.calls where location_id = $1 and outcome = 'booked' and appointment_date is not null)::int bookings`,
      [second.id])).rows[0];
    expect({ leads: summary.leads, bookings: summary.bookings }).toEqual(shape);
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
