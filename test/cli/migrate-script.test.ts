/**
 * `npm run migrate` (README: apply the committed migrations, what start-up does) runs against an
 * empty database and leaves every committed migration applied. It once pointed at a CLI command
 * that does not exist.
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { projectRoot } from '../../src/db/migrate.js';
import { createEmptyDatabase, type TestDatabase } from '../support/db.js';
import { childEnv } from '../support/spawn.js';

const run = promisify(execFile);
let db: TestDatabase;
beforeAll(async () => {
  db = await createEmptyDatabase();
});
afterAll(() => db.drop());

test('npm run migrate applies every committed migration to an empty database', async () => {
  await run('npm', ['run', '-s', 'migrate'], { cwd: projectRoot, env: childEnv({ DATABASE_URL: db.url }), timeout: 90_000 });
  const committed = readdirSync(path.join(projectRoot, 'migrations', 'committed')).filter((f) => f.endsWith('.sql'));
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ filename: string }>('select filename from graphile_migrate.migrations order by filename');
    // graphile-migrate records each by its number: 000001-roles-….sql → 000001.sql.
    expect(rows.map((r) => r.filename)).toEqual(committed.sort().map((f) => `${f.slice(0, 6)}.sql`));
  } finally {
    await client.end();
  }
}, 120_000);
