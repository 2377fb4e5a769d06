import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { withDatabase } from './url.js';

export interface TestDatabase {
  /** Owner connection string of a fresh database (migrated, unless made empty). */
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
  const template = process.env.SB_TEST_TEMPLATE;
  if (!template) throw new Error('global setup did not run');
  return newDatabase(`template ${template}`);
}

/** A new, empty database (no schema at all), for tests of migrating itself. */
export async function createEmptyDatabase(): Promise<TestDatabase> {
  return newDatabase('');
}

async function newDatabase(options: string): Promise<TestDatabase> {
  const name = `sb_test_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`create database ${name} ${options}`));
  return {
    name,
    url: withDatabase(process.env.SB_TEST_ADMIN_URL!, name),
    drop: () => admin((c) => c.query(`drop database if exists ${name} with (force)`)).then(() => undefined),
  };
}
