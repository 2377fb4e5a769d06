/**
 * `npm run db:functions`: brings the database `npm run db` uses (embedded or DATABASE_URL) to the
 * committed migrations plus migrations/current.sql, then rewrites migrations/functions/ from it:
 * one file per SQL function with its current definition (src/db/function-files.ts).
 */
import pg from 'pg';
import { resolveDatabase } from '../db/connection.js';
import { functionFiles, functionsFolder, writeFunctionFiles } from '../db/function-files.js';
import { migrateDatabase } from '../db/migrate.js';
import { createLogger } from '../log.js';
import { loadConfigOrExit } from './errors.js';

const cfg = loadConfigOrExit();
const log = createLogger(cfg.LOG_LEVEL, 2);
const db = await resolveDatabase(cfg, log);
try {
  await migrateDatabase(db.url, log, { includeCurrent: true });
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const files = await functionFiles(client);
    const { changed, missing, extra } = writeFunctionFiles(files);
    process.stderr.write(
      `${functionsFolder}: ${files.size} functions; ${missing.length} added, ${changed.length} changed, ${extra.length} removed\n` +
        [...missing.map((f) => `  + ${f}`), ...changed.map((f) => `  ~ ${f}`), ...extra.map((f) => `  - ${f}`)].join('\n') +
        (missing.length + changed.length + extra.length ? '\n' : ''),
    );
  } finally {
    await client.end();
  }
} finally {
  await db.stop();
}
