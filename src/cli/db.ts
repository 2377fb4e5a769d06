/**
 * `npm run db -- <graphile-migrate command>`: runs graphile-migrate (watch, commit, uncommit,
 * migrate, reset, status) against the same database the server uses, embedded or DATABASE_URL,
 * with the shadow and root connections it needs filled in. A failure before graphile-migrate
 * starts (the database down, refusing us) ends like a CLI error: one JSON line on stdout, exit 1.
 */
import '../node-version.js';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ensureDatabase } from '../db/embedded/index.js';
import { resolveDatabase, type Database } from '../db/connection.js';
import { assertCanMigrate, projectRoot } from '../db/migrate.js';
import { createOwnerPool, endPool } from '../db/pools.js';
import { createLogger } from '../log.js';
import { runMigrations } from 'graphile-worker';
import { exitWithError, loadConfigOrExit } from './errors.js';

const cfg = loadConfigOrExit();
const log = createLogger(cfg.LOG_LEVEL, 2);
let db: Database | undefined;
const env: NodeJS.ProcessEnv = { ...process.env };
try {
  db = await resolveDatabase(cfg, log);
  env.DATABASE_URL = db.url;
  if (db.embedded) {
    env.SHADOW_DATABASE_URL = db.embedded.urlFor('switchboard_shadow');
    env.ROOT_DATABASE_URL = db.embedded.urlFor('postgres');
    await ensureDatabase(env.ROOT_DATABASE_URL, 'switchboard_shadow');
  }
  // `migrate` refuses what start-up refuses (src/db/migrate.ts), before anything runs: a database
  // of another chain, or migrations to run without a superuser.
  if (process.argv[2] === 'migrate') await assertCanMigrate(db.url);
  // Our migrations grant on graphile_worker objects, so its schema must exist first (also in the
  // shadow). On a pool of ours: its connection is bounded (src/db/pools.ts), graphile-worker's own is not.
  const pgPool = createOwnerPool(db.url, 1, 'switchboard-db');
  try {
    await runMigrations({ pgPool });
  } finally {
    await endPool(pgPool);
  }
} catch (err) {
  // A database that is down or refuses us: the CLI's one error line (src/cli/errors.ts), not a stack.
  await db?.stop().catch(() => undefined);
  exitWithError(err);
}
const started = db;

const require = createRequire(import.meta.url);
const bin = path.join(path.dirname(require.resolve('graphile-migrate/package.json')), 'dist', 'cli.js');
const child = spawn(process.execPath, [bin, ...process.argv.slice(2)], { env, stdio: 'inherit', cwd: projectRoot });
const stop = () => child.kill('SIGINT');
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
child.on('exit', async (code) => {
  await started.stop();
  process.exit(code ?? 1);
});
