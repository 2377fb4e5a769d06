/**
 * Seeding without per-row foreign-key checks (docs/decisions.md, "Seeding without per-row
 * foreign-key checks"). When its role may, `demo seed` runs each batch with
 * session_replication_role = replica: the foreign-key triggers and every trigger enabled only for
 * the origin role stay silent. These tests hold what that relies on: the checks are really skipped
 * (the referenced keys are not read), no row is left without what it references, the triggers that
 * stay silent would have done nothing for a seeded row, and the rollup's bulk triggers still fire.
 */
import type pg from 'pg';
import { foreignKeyChecks, seedBatch, type ForeignKeyChecks } from '../../src/cli/demo-seed.js';
import { callFn } from '../../src/db/pools.js';
import { useTestDatabase, xactReads } from '../support/db.js';
import { createLocation, type TestLocation } from '../support/harness.js';

const db = useTestDatabase({ pool: true });
const SEEDED = ['app.customers', 'app.calls', 'app.leads', 'app.bookings'];
let loc: TestLocation;

beforeAll(async () => {
  loc = await createLocation(db.owner);
});

/** Index scans this transaction made of each table the seeded rows reference. */
async function keyReads(c: pg.PoolClient): Promise<Record<string, number>> {
  const reads: Record<string, number> = {};
  for (const table of ['locations', 'customers', 'calls', 'leads']) reads[table] = (await xactReads(c, [`app.${table}`])).idx;
  return reads;
}

/** A batch of `calls` calls in a transaction of its own; what it read of the referenced keys. */
async function batch(checks: ForeignKeyChecks, calls: number, keep: boolean): Promise<Record<string, number>> {
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    const { first_number: first } = await callFn<{ first_number: number }>(c, 'admin.demo_seed_prepare', [loc.slug]);
    const before = await keyReads(c);
    await seedBatch(c, checks, [loc.slug, calls, first, 0, 30, null]);
    const after = await keyReads(c);
    const role = (await c.query('show session_replication_role')).rows[0].session_replication_role;
    expect(role).toBe('origin');
    await c.query(keep ? 'commit' : 'rollback');
    return Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] ?? 0)]));
  } finally {
    c.release();
  }
}

test('a batch in the replica role reads none of the keys its rows reference; checked per row it reads each', async () => {
  expect(await foreignKeyChecks(db.owner)).toBe('per_batch');
  const checked = await batch('per_row', 1000, false);
  const unchecked = await batch('per_batch', 1000, true);
  // Per row: a lookup of the location for each of about 2,700 rows, of the customer for each call,
  // lead and booking, of the call for each lead and booking, of the lead for each booking.
  expect(checked.locations).toBeGreaterThan(2000);
  expect(checked.customers).toBeGreaterThan(1500);
  expect(checked.calls).toBeGreaterThan(500);
  expect(checked.leads).toBeGreaterThan(100);
  // In the replica role: the batch's own lock of its location (and its hours), nothing else.
  expect(unchecked.locations).toBeLessThanOrEqual(3);
  expect(unchecked).toMatchObject({ customers: 0, calls: 0, leads: 0 });
});

test('no seeded row misses what its foreign keys reference', async () => {
  const { rows: fks } = await db.owner.query(
    `select conname, conrelid::regclass::text child, confrelid::regclass::text parent,
            array(select attname from unnest(conkey) with ordinality k(n, i) join pg_attribute a on a.attrelid = conrelid and a.attnum = k.n order by i)::text[] cols,
            array(select attname from unnest(confkey) with ordinality k(n, i) join pg_attribute a on a.attrelid = confrelid and a.attnum = k.n order by i)::text[] refs
       from pg_constraint where contype = 'f' and conrelid = any ($1::regclass[])`, [SEEDED]);
  expect(fks.length).toBe(11);
  const { rows: [{ n: seeded }] } = await db.owner.query('select count(*)::int n from app.calls where location_id = $1', [loc.id]);
  expect(seeded).toBe(1000);
  for (const fk of fks) {
    const notNull = fk.cols.map((col: string) => `x.${col} is not null`).join(' and ');
    const match = fk.cols.map((col: string, i: number) => `p.${fk.refs[i]} = x.${col}`).join(' and ');
    const { rows: [{ n }] } = await db.owner.query(
      `select count(*)::int n from ${fk.child} x where x.location_id = $1 and ${notNull}
          and not exists (select 1 from ${fk.parent} p where ${match})`, [loc.id]);
    expect({ fk: fk.conname, missing: n }).toEqual({ fk: fk.conname, missing: 0 });
  }
});

test('the triggers the replica role silences do nothing for a seeded row; the rollup\'s bulk triggers fire', async () => {
  // Every trigger on the seeded tables that an INSERT fires, with how it is enabled: A always,
  // O only for the origin role. A new O trigger here must be judged for seeded rows and listed.
  const { rows } = await db.owner.query(
    `select tgrelid::regclass::text || '.' || tgname as name, tgenabled::text as enabled from pg_trigger
      where tgrelid = any ($1::regclass[]) and not tgisinternal and tgtype & 4 <> 0 order by 1`, [SEEDED]);
  expect(Object.fromEntries(rows.map((r) => [r.name, r.enabled]))).toEqual({
    'app.bookings._200_window': 'O', // seeded bookings have no window: it would set window_end to null
    'app.bookings._300_window_capacity': 'O', // no window, nothing to count
    'app.bookings._500_events': 'O', // returns at once while seeding
    'app.calls._200_after_hours': 'O', // its WHEN needs after_hours null; the seeder sets it
    'app.calls._300_insights_bulk': 'A',
    'app.calls._300_insights_insert': 'O', // its WHEN is false while seeding
    'app.leads._300_insights_bulk': 'A',
    'app.leads._300_insights_insert': 'O', // its WHEN is false while seeding
    'app.leads._500_events': 'O', // returns at once while seeding
  });
  const { rows: [r] } = await db.owner.query(
    `select (select count(*)::int from app.calls where location_id = $1 and after_hours is null) no_flag,
            (select count(*)::int from app.bookings where location_id = $1 and (window_start is not null or window_end is not null)) windows,
            (select count(*)::int from app.events where location_id = $1) events,
            (select count(*)::int from app.bookings where location_id = $1) bookings,
            (select count(*)::int from app.bookings where location_id = $1 and source <> 'call') not_of_a_call`, [loc.id]);
  // Every seeded booking is a booked call's, as a post-call's would be (source 'call').
  expect(r).toMatchObject({ no_flag: 0, windows: 0, events: 0, not_of_a_call: 0 });
  expect(r.bookings).toBeGreaterThan(100);
  // The rollup the bulk triggers kept, against the computation over the rows themselves.
  for (const days of [7, 30, 90]) {
    const { rows: [q] } = await db.owner.query(
      'select app.insights_json($1, $2, now()) rollup, app.insights_direct($1, $2, now()) direct', [loc.id, days]);
    expect(q.rollup).toEqual(q.direct);
  }
});

test('a batch in the replica role puts back the role the session had', async () => {
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    await c.query('set local session_replication_role = local');
    const { first_number: first } = await callFn<{ first_number: number }>(c, 'admin.demo_seed_prepare', [loc.slug]);
    await seedBatch(c, 'per_batch', [loc.slug, 10, first, 0, 30, null]);
    expect((await c.query('show session_replication_role')).rows[0].session_replication_role).toBe('local');
  } finally {
    await c.query('rollback');
    c.release();
  }
});
