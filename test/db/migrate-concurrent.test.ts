/**
 * Two processes migrating one database at the same moment (an API and a worker started together):
 * the second waits for the first instead of failing on graphile-migrate's lock.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrateDatabase } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';

const adminUrl = () => process.env.SB_TEST_ADMIN_URL!;
const urlOf = (name: string) => {
  const u = new URL(adminUrl());
  u.pathname = `/${name}`;
  return u.toString();
};
async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl() });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

const name = `sb_test_mig_${randomBytes(6).toString('hex')}`;
beforeAll(async () => {
  // An empty database (not the migrated template): both calls find migrations to run.
  await admin(`create database ${name}`);
});
afterAll(async () => {
  await admin(`drop database if exists ${name} with (force)`);
});

test('three concurrent migrations of an empty database all succeed, and the schema is migrated once', async () => {
  const log = createLogger('silent', 2);
  const url = urlOf(name);
  const results = await Promise.allSettled([migrateDatabase(url, log), migrateDatabase(url, log), migrateDatabase(url, log)]);
  expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok']);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query('select count(*)::int as n, count(distinct filename)::int as files from graphile_migrate.migrations');
    expect(rows[0].n).toBe(rows[0].files);
    expect(rows[0].n).toBeGreaterThan(0);
  } finally {
    await c.end();
  }
});
