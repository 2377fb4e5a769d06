/**
 * A 400 or 409 from a constraint names the field from PostgreSQL's default constraint name
 * (migrations/CONVENTIONS.md, "Naming"): `<table>_<column>_<check|key|fkey>`, the table being the
 * one the error reports, and without the `location_id` every unique key leads with. Real
 * constraint errors from the database, caught as node-postgres raises them.
 */
import pg from 'pg';
import { toApiError } from '../../src/http/errors.js';
import { createTestDatabase, endPool, type TestDatabase } from '../support/db.js';
import { createLocation } from '../support/harness.js';

let db: TestDatabase;
let owner: pg.Pool;
let loc: string;
beforeAll(async () => {
  db = await createTestDatabase();
  owner = new pg.Pool({ connectionString: db.url, max: 2 });
  loc = (await createLocation(owner)).id;
});
afterAll(async () => {
  await endPool(owner);
  await db.drop();
});

/** The API error a failing statement becomes. */
async function answerOf(sql: string, params: unknown[]) {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [loc]);
    await c.query(sql, params);
    throw new Error('the statement did not fail');
  } catch (e) {
    return toApiError(e);
  } finally {
    await c.query('rollback');
    c.release();
  }
}

/** The API error of a statement run twice: the second breaks a unique key. */
async function duplicateOf(sql: string, params: unknown[]) {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [loc]);
    await c.query(sql, params);
    const err = await c.query(sql, params).then(() => null, (e: unknown) => e);
    return { err, api: toApiError(err) };
  } finally {
    await c.query('rollback');
    c.release();
  }
}

test('a unique key led by location_id names its columns, also on a table whose name has an underscore', async () => {
  const customers = await duplicateOf("insert into app.customers (location_id, phone) values ($1, '+15125550100')", [loc]);
  expect(customers.err).toMatchObject({ code: '23505', constraint: 'customers_location_id_phone_key' });
  expect([customers.api.status, customers.api.code, customers.api.details]).toEqual([409, 'conflict', { field: 'phone' }]);
  const hours = await duplicateOf("insert into app.business_hours (location_id, day, open, close) values ($1, 1, '08:00', '17:00')", [loc]);
  expect(hours.err).toMatchObject({ code: '23505', constraint: 'business_hours_location_id_day_open_key' });
  expect(hours.api.details).toEqual({ field: 'day_open' });
});

test('a check of a table whose name has an underscore names its column', async () => {
  const api = await answerOf("insert into app.pricebook_items (location_id, service_name, price) values ($1, '', '$1')", [loc]);
  expect(api.status).toBe(400);
  expect(api.details).toEqual({ issues: [{ path: 'service_name', message: 'Invalid value' }] });
});

test('a one-word table keeps its field', async () => {
  const api = await answerOf("insert into app.leads (location_id, name, phone, email) values ($1, 'A', '+15125550100', 'not an address')", [loc]);
  expect(api.details).toEqual({ issues: [{ path: 'email', message: 'Invalid value' }] });
});
