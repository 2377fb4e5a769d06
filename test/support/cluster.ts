/**
 * One PostgreSQL for the whole run (a throwaway embedded cluster, or TEST_DATABASE_URL), and one
 * migrated template database; each test file clones the template (see db.ts), which takes
 * milliseconds and keeps files independent.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbedded, ensureDatabase, type EmbeddedCluster } from '../../src/db/embedded/index.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { withClient } from './db.js';
import { withDatabase } from './url.js';

declare global {
  // eslint-disable-next-line no-var
  var __SB_CLUSTER__: EmbeddedCluster | undefined;
}

/** The run's scratch directory for files the tests make (certificates), removed at teardown. */
const scratchDir = path.join(os.tmpdir(), `switchboard-test-files-${process.pid}`);

/**
 * The run's own throwaway cluster does not ask the disk to flush: its data is gone at teardown
 * anyway, and what the tests do to it (processes killed, backends terminated) loses nothing
 * without fsync, which only guards against the machine itself going down. Only the cluster the
 * run starts: a TEST_DATABASE_URL cluster is left as it is (docs/decisions.md, "The tests' own
 * cluster does not flush to disk").
 */
async function withoutFsync(adminUrl: string): Promise<void> {
  await withClient(adminUrl, async (c) => {
    await c.query('alter system set fsync = off');
    await c.query('alter system set full_page_writes = off');
    await c.query('select pg_reload_conf()');
  });
}

export default async function globalSetup(): Promise<void> {
  fs.rmSync(scratchDir, { recursive: true, force: true });
  fs.mkdirSync(scratchDir);
  process.env.SB_TEST_SCRATCH = scratchDir;
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 2);
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    const dir = path.join(os.tmpdir(), `switchboard-test-${process.pid}`);
    fs.rmSync(dir, { recursive: true, force: true });
    globalThis.__SB_CLUSTER__ = await startEmbedded(dir, log);
    adminUrl = globalThis.__SB_CLUSTER__.urlFor('postgres');
    await withoutFsync(adminUrl);
  }
  const template = `sb_template_${process.pid}`;
  await withClient(adminUrl, (c) => c.query(`drop database if exists ${template} with (force)`));
  await ensureDatabase(adminUrl, template);
  await migrateDatabase(withDatabase(adminUrl, template), log, { includeCurrent: true });
  process.env.SB_TEST_ADMIN_URL = adminUrl;
  process.env.SB_TEST_TEMPLATE = template;
}
