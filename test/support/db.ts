import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { withDatabase } from './url.js';

export interface TestDatabase {
  /** Owner connection string of a fresh, migrated database. */
  url: string;
  name: string;
  drop(): Promise<void>;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: process.env.SB_TEST_ADMIN_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A new database cloned from the migrated template: each test file gets its own. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `sb_test_${randomBytes(6).toString('hex')}`;
  const template = process.env.SB_TEST_TEMPLATE;
  if (!template) throw new Error('global setup did not run');
  await admin((c) => c.query(`create database ${name} template ${template}`));
  return {
    name,
    url: withDatabase(process.env.SB_TEST_ADMIN_URL!, name),
    drop: () => admin((c) => c.query(`drop database if exists ${name} with (force)`)).then(() => undefined),
  };
}
