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
