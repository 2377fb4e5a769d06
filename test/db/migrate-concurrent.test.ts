/**
 * Two processes migrating one database at the same moment (an API and a worker started together):
 * the second waits for the first instead of failing on graphile-migrate's lock.
 */
import { migrateDatabase } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { useTestDatabase, withClient } from '../support/db.js';

// An empty database (not the migrated template): every call finds migrations to run.
const db = useTestDatabase({ empty: true });

test('three concurrent migrations of an empty database all succeed, and the schema is migrated once', async () => {
  const log = createLogger('silent', 2);
  const results = await Promise.allSettled([migrateDatabase(db.url, log), migrateDatabase(db.url, log), migrateDatabase(db.url, log)]);
  expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok']);
  const { rows } = await withClient(db.url, (c) => c.query('select count(*)::int as n, count(distinct filename)::int as files from graphile_migrate.migrations'));
  expect(rows[0].n).toBe(rows[0].files);
  expect(rows[0].n).toBeGreaterThan(0);
});
