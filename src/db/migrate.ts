import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Logger as GraphileLogger, migrate as gmMigrate, watch as gmWatch, type Settings } from 'graphile-migrate';
import { runMigrations as workerMigrations, Logger as WorkerLogger } from 'graphile-worker';
import pg from 'pg';
import type { Logger } from '../log.js';
import { CONNECT_TIMEOUT_MS } from './pools.js';
// graphile-migrate keeps its pools ~200 ms after use and exits the process if an idle one errors
// (as when the embedded cluster stops); ending them right after migrating avoids that.
import pgReal from 'graphile-migrate/dist/pgReal.js';

/**
 * The repository root (where package.json, migrations/ and tasks/ live), found from this file
 * whether it runs as TypeScript from src/ or compiled from dist/src/.
 */
export const projectRoot = findRoot(path.dirname(fileURLToPath(import.meta.url)));

function findRoot(dir: string): string {
  for (let d = dir; ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, 'package.json'))) return d;
    if (path.dirname(d) === d) return path.resolve(dir, '..', '..');
  }
}
export const migrationsFolder = path.join(projectRoot, 'migrations');

function graphileLogger(log: Logger) {
  return (scope: unknown) => (level: string, message: string, meta?: unknown) => {
    // An idle pooled connection dropped while the embedded cluster stops is not an error.
    const benign = /error occurred in the PgPool/i.test(message);
    const fn = benign ? log.debug : level === 'error' ? log.error : level === 'warning' ? log.warn : log.debug;
    fn.call(log, { scope, meta }, message);
  };
}

export function migrateSettings(connectionString: string, log: Logger): Settings {
  return {
    connectionString,
    migrationsFolder,
    logger: new GraphileLogger(graphileLogger(log)),
  };
}

/**
 * Brings a database to the committed schema: graphile-worker's own schema first (our triggers
 * enqueue into it), then our graphile-migrate migrations. `includeCurrent` also applies
 * `migrations/current.sql`, the DBA's work in progress (tests run against it too).
 */
export async function migrateDatabase(
  connectionString: string,
  log: Logger,
  { includeCurrent = false }: { includeCurrent?: boolean } = {},
): Promise<void> {
  // graphile-migrate takes its own lock with pg_try_advisory_lock and fails at once ("Failed to get
  // exclusive lock") when another process holds it, so an API and a worker starting together on
  // one database would crash one of them. This session lock makes the second wait, then find the
  // schema up to date.
  // Bounded like the pools' connections: a database that does not answer fails start-up and the
  // CLI as unavailable instead of hanging (docs/operations.md, "A database that does not answer").
  const lock = new pg.Client({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1)', [MIGRATE_LOCK]);
    // Before anything runs: a database of another chain, or pending migrations and a role that
    // cannot run them, would otherwise fail part-way with graphile-migrate's or PostgreSQL's error.
    await assertCanMigrate(connectionString);
    await workerMigrations({
      connectionString,
      logger: new WorkerLogger(graphileLogger(log) as never),
    });
    const settings = migrateSettings(connectionString, log);
    try {
      await gmMigrate(settings);
      if (includeCurrent) await gmWatch(settings, true);
    } finally {
      pgReal.clearAllPools();
    }
  } finally {
    // Ending the session releases the lock, whatever happened above.
    await lock.end();
  }
}

/** Advisory lock key serialising migrateDatabase across processes (any constant not used elsewhere). */
const MIGRATE_LOCK = 0x5b_0d_16_01;

/**
 * Checked before any migration runs (start-up and `npm run migrate`):
 * - graphile-migrate runs the committed migrations numbered after the database's last one and
 *   never looks at the ones it recorded before, so a database migrated with another chain (one
 *   from before the re-baseline, or from a commit whose early files were edited afterwards) met
 *   the next file's SQL and failed with that error, or passed as up to date. Every recorded
 *   migration must be a committed file with the same hash; otherwise it stops with the fix.
 * - The migrations create roles, hand functions and schemas to them and grant in between, which
 *   only a superuser can do in that order: a role without it (CREATEROLE, a managed service's
 *   admin) failed at 000008 with "permission denied for schema billing", after 000001–000007
 *   had committed. With migrations to run and no superuser, nothing runs and it says so; an
 *   up-to-date database needs no superuser to start.
 */
export async function assertCanMigrate(connectionString: string): Promise<void> {
  const dir = path.join(migrationsFolder, 'committed');
  const committed = new Map(
    fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.sql'))
      // graphile-migrate records a committed file by its number only (000003-foo.sql → 000003.sql).
      .map((f) => [f.replace(/^(\d+).*$/, '$1.sql'), /^--! Hash: (\S+)$/m.exec(fs.readFileSync(path.join(dir, f), 'utf8'))?.[1]] as const),
  );
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  await client.connect();
  try {
    const { rows: [{ superuser, migrated }] } = await client.query<{ superuser: boolean; migrated: boolean }>(
      `select (select rolsuper from pg_roles where rolname = current_user) as superuser,
              to_regclass('graphile_migrate.migrations') is not null as migrated`,
    );
    // A new database has no graphile_migrate table yet: nothing recorded, nothing foreign.
    const recorded = migrated
      ? (await client.query<{ filename: string; hash: string }>('select filename, hash from graphile_migrate.migrations order by filename')).rows
      : [];
    const foreign = recorded.filter((r) => committed.get(r.filename) !== r.hash).map((r) => r.filename);
    if (foreign.length) {
      throw new Error(
        `the database was migrated with a different migration chain (${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', …' : ''} ` +
          'are not the committed migrations); reset it: delete DATA_DIR for the embedded database, or run ' +
          '`npm run db -- reset --erase` (docs/decisions.md, "Re-baselined migrations")',
      );
    }
    const pending = committed.size - recorded.length;
    if (pending > 0 && !superuser) {
      throw new Error(
        `${pending} migration${pending === 1 ? '' : 's'} to run, and the role of DATABASE_URL is not a PostgreSQL superuser: ` +
          'the migrations create roles and transfer ownership to them, which needs one. Nothing was run; run ' +
          '`npm run migrate` once with a superuser\'s DATABASE_URL (README, "Running against an external PostgreSQL")',
      );
    }
  } finally {
    await client.end();
  }
}
