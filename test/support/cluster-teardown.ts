import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export default async function globalTeardown(): Promise<void> {
  if (process.env.SB_TEST_SCRATCH) fs.rmSync(process.env.SB_TEST_SCRATCH, { recursive: true, force: true });
  const adminUrl = process.env.SB_TEST_ADMIN_URL;
  if (adminUrl && process.env.TEST_DATABASE_URL) {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`drop database if exists ${process.env.SB_TEST_TEMPLATE} with (force)`);
    await admin.end();
  }
  if (globalThis.__SB_CLUSTER__) {
    await globalThis.__SB_CLUSTER__.stop();
    fs.rmSync(path.join(os.tmpdir(), `switchboard-test-${process.pid}`), { recursive: true, force: true });
  }
}
