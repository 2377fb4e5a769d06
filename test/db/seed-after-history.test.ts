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
 */
import pg from 'pg';
import { callFn } from '../../src/db/pools.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { createLocation, type TestLocation } from '../support/harness.js';

const CALLS = 3000;
let db: TestDatabase;
let owner: pg.Pool;
let history: TestLocation;
let second: TestLocation;

beforeAll(async () => {
  db = await createTestDatabase();
  owner = new pg.Pool({ connectionString: db.url, max: 2 });
  history = await createLocation(owner);
  second = await createLocation(owner);
  await callFn(owner, 'admin.demo_seed_prepare', [history.slug, 210]);
  await callFn(owner, 'admin.demo_seed_calls', [history.slug, 300, 30]);
  await callFn(owner, 'admin.demo_seed_finish', [history.slug]);
  await owner.query('analyze app.calls, app.customers, app.leads, app.bookings');
});

afterAll(async () => {
  await owner.end();
  await db.drop();
});

// Heap tuples fetched in this transaction through the indexes of the three tables (an index scan
// counts its fetches against the index; idx_tup_fetch of pg_stat_user_tables sums the same).
const FETCHED = `select coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)::bigint n
                   from pg_index i where i.indrelid = any (array['app.calls', 'app.leads', 'app.bookings']::regclass[])`;

test('finishing a seed into a location the statistics do not know reads rows linearly, not per deleted customer', async () => {
  const c = await owner.connect();
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
