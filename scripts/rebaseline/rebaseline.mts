/**
 * `npx tsx scripts/rebaseline/rebaseline.mts`: re-baselines migrations/committed/ and proves it.
 * On a throwaway embedded cluster: migrates a database with the chain as it is, generates the new
 * chain from its catalog (generate.mjs), migrates a second database with the new chain, and
 * compares the two catalogs (catalog.mjs). Exits 1 with the differences when they are not
 * identical (restore the old files with git then). With `--fold-current`, the first database also
 * gets migrations/current.sql, which the new chain then contains (current.sql is left blank):
 * how a change made before any production database exists is folded into the baseline.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDatabase, startEmbedded } from '../../src/db/embedded/index.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const foldCurrent = process.argv.includes('--fold-current');
const currentSql = path.join(here, '..', '..', 'migrations', 'current.sql');
const log = createLogger('warn', 2);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-rebaseline-'));
const cluster = await startEmbedded(dir, log);
let code = 0;
try {
  const catalog = (db: string) =>
    execFileSync(process.execPath, [path.join(here, 'catalog.mjs'), cluster.urlFor(db)], { encoding: 'utf8', maxBuffer: 1 << 28 });
  await ensureDatabase(cluster.urlFor('postgres'), 'before');
  await migrateDatabase(cluster.urlFor('before'), log, { includeCurrent: foldCurrent });
  execFileSync(process.execPath, [path.join(here, 'generate.mjs'), cluster.urlFor('before')], { stdio: 'inherit' });
  if (foldCurrent) fs.writeFileSync(currentSql, '-- Enter migration here\n');
  await ensureDatabase(cluster.urlFor('postgres'), 'after');
  await migrateDatabase(cluster.urlFor('after'), log);
  fs.writeFileSync(path.join(dir, 'before.txt'), catalog('before'));
  fs.writeFileSync(path.join(dir, 'after.txt'), catalog('after'));
  try {
    execFileSync('diff', [path.join(dir, 'before.txt'), path.join(dir, 'after.txt')], { stdio: 'inherit' });
    console.log('catalogs identical: the new chain builds the same schema');
  } catch {
    console.error('catalogs differ (above: < before, > after)');
    code = 1;
  }
} finally {
  await cluster.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
