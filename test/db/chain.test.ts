/** A database migrated with another chain (as before the re-baseline) is refused, not taken as up to date. */
import { migrateDatabase } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { useTestDatabase, withClient } from '../support/db.js';

const db = useTestDatabase();

test('migrating a database of this chain is a no-op; one that recorded a migration not committed here is refused with the fix', async () => {
  const log = createLogger('silent', 2);
  await expect(migrateDatabase(db.url, log)).resolves.toBeUndefined();
  // What a developer database migrated with the old 18-file chain looks like to graphile-migrate.
  await withClient(db.url, (c) => c.query(`insert into graphile_migrate.migrations (filename, hash, previous_hash, date)
                   select '000018.sql', 'sha1:' || repeat('0', 40), hash, now()
                     from graphile_migrate.migrations order by filename desc limit 1`));
  await expect(migrateDatabase(db.url, log)).rejects.toThrow(/different migration chain \(000018\.sql.*reset --erase/);
});

test('a database of an older, different chain is refused before any migration runs', async () => {
  const log = createLogger('silent', 2);
  // A database migrated at a commit whose early files were edited afterwards: fewer migrations
  // than committed here, an earlier one with another hash. graphile-migrate ran the next file
  // and failed on its SQL ("relation … already exists") instead of naming the fix.
  const before = await withClient(db.url, async (c) => {
    await c.query(`delete from graphile_migrate.migrations where filename > '000011.sql'`);
    await c.query(`alter table graphile_migrate.migrations drop constraint if exists migrations_previous_hash_fkey`);
    await c.query(`update graphile_migrate.migrations set hash = 'sha1:' || repeat('1', 40) where filename = '000011.sql'`);
    return (await c.query(`select count(*)::int n from graphile_migrate.migrations`)).rows[0].n as number;
  });
  await expect(migrateDatabase(db.url, log)).rejects.toThrow(/different migration chain \(000011\.sql.*reset --erase/);
  const after = await withClient(db.url, async (c) => (await c.query(`select count(*)::int n from graphile_migrate.migrations`)).rows[0].n as number);
  expect(after).toBe(before);
});
