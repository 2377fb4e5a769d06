/**
 * `npm run migrate` (README: apply the committed migrations, what start-up does) runs against an
 * empty database and leaves every committed migration applied. It once pointed at a CLI command
 * that does not exist. `npm run db` against a database that is down, or with a setting refused,
 * ends like a CLI error.
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { projectRoot } from '../../src/db/migrate.js';
import { randomBytes } from 'node:crypto';
import { createEmptyDatabase, withClient, type TestDatabase } from '../support/db.js';
import { childEnv, freePort, tsxBin } from '../support/spawn.js';

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


test('npm run db against a database that is down prints one unavailable error line (no password, no stack) and exits 1', async () => {
  // Setup: nothing listens on the port.
  const url = `postgres://operator:s3cret-pw@127.0.0.1:${await freePort()}/switchboard`;
  // Action: what `npm run -s db -- status` runs.
  const failed = await run(tsxBin, ['src/cli/db.ts', 'status'], { cwd: projectRoot, env: childEnv({ DATABASE_URL: url }), timeout: 60_000 })
    .then(() => ({ code: 0, stdout: '', stderr: '' }), (err: { code: number; stdout: string; stderr: string }) => err);
  // Assertions
  expect(failed.code).toBe(1);
  expect(failed.stdout.trim().split('\n')).toHaveLength(1);
  expect(JSON.parse(failed.stdout)).toEqual({
    error: { code: 'unavailable', message: expect.stringMatching(/^The database is unavailable; try again shortly \(connect ECONNREFUSED 127\.0\.0\.1:\d+\)$/), details: {} },
  });
  expect(failed.stderr).not.toMatch(/^\s+at /m);
  expect(failed.stdout + failed.stderr).not.toContain('s3cret-pw');
}, 90_000);

test.each([
  ['npm run db', 'src/cli/db.ts', ['status']],
  ['npm run cli', 'src/cli/index.ts', ['location', 'list']],
])('%s with a setting the start-up check refuses prints one validation_error line naming it (no stack) and exits 1', async (_name, script, args) => {
  // Action: a retry delay past 30 days, which the service would also refuse to start with.
  const failed = await run(tsxBin, [script, ...args], { cwd: projectRoot, env: childEnv({ DATABASE_URL: db.url, WEBHOOK_RETRY_DELAYS: '60,3000000000' }), timeout: 60_000 })
    .then(() => ({ code: 0, stdout: '', stderr: '' }), (err: { code: number; stdout: string; stderr: string }) => err);
  // Assertions
  expect(failed.code).toBe(1);
  expect(failed.stdout.trim().split('\n')).toHaveLength(1);
  expect(JSON.parse(failed.stdout)).toEqual({
    error: { code: 'validation_error', message: expect.stringMatching(/^Invalid configuration: WEBHOOK_RETRY_DELAYS: at most 100 delays/), details: {} },
  });
  expect(failed.stderr).not.toMatch(/^\s+at /m);
}, 90_000);

test('npm run migrate as a role that is not a superuser runs nothing and says a superuser is needed', async () => {
  // Setup: a CREATEROLE owner of an empty database, as a managed service's admin role would be.
  const role = `sb_nosuper_${randomBytes(4).toString('hex')}`;
  const admin = process.env.SB_TEST_ADMIN_URL!;
  const empty = await createEmptyDatabase();
  await withClient(admin, async (c) => {
    await c.query(`create role ${role} login createrole password 'nosuper-pw'`);
    await c.query(`alter database ${empty.name} owner to ${role}`);
  });
  const url = new URL(empty.url);
  url.username = role;
  url.password = 'nosuper-pw';
  try {
    // Action: what `npm run migrate` runs.
    const failed = await run(tsxBin, ['src/cli/db.ts', 'migrate'], { cwd: projectRoot, env: childEnv({ DATABASE_URL: url.toString() }), timeout: 60_000 })
      .then(() => ({ code: 0, stdout: '', stderr: '' }), (err: { code: number; stdout: string; stderr: string }) => err);
    // Assertions: one line naming the fix; no schema of graphile-migrate, graphile-worker or ours.
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout).error.message).toMatch(/^\d+ migrations to run, and the role of DATABASE_URL is not a PostgreSQL superuser: .*Nothing was run/);
    const schemas = await withClient(empty.url, async (c) => (await c.query<{ n: number }>(
      `select count(*)::int as n from pg_namespace where nspname in ('graphile_migrate', 'graphile_worker', 'app', 'billing')`)).rows[0].n);
    expect(schemas).toBe(0);
  } finally {
    await empty.drop();
    await withClient(admin, (c) => c.query(`drop role if exists ${role}`));
  }
}, 90_000);
