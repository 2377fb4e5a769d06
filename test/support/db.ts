import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { withDatabase } from './url.js';

export interface TestDatabase {
  /** Owner connection string of a fresh database (migrated, unless made empty). */
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** Runs `fn` on a client of its own to `url`, ended afterwards. */
export async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const admin = <T>(fn: (c: pg.Client) => Promise<T>) => withClient(process.env.SB_TEST_ADMIN_URL!, fn);

/**
 * Ends `pool` and waits until every connection of it has closed. pg-pool's end() resolves once it
 * has asked its idle connections to close, not once they have: a database dropped right after
 * (`with (force)`) could terminate one still open, and the pool would throw that termination as an
 * unhandled error event, failing the file after its tests had passed.
 */
export async function endPool(pool: pg.Pool): Promise<void> {
  let open = pool.totalCount;
  const closed = new Promise<void>((resolve) => {
    if (open === 0) resolve();
    pool.on('remove', () => {
      if (--open <= 0) resolve();
    });
  });
  await pool.end();
  await closed;
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

/** A test file's database and, when asked for, a connected client and an owner pool on it. */
export interface DatabaseFixture extends TestDatabase {
  client: pg.Client;
  owner: pg.Pool;
}

/**
 * Registers the file's database: made before its tests (migrated, or with `empty` no schema at
 * all), with a connected `client` and/or an owner `pool` (2 connections) when asked for; all ended
 * and dropped after the file. The returned object is filled in by the time the first test (or a
 * later beforeAll) runs.
 */
export function useTestDatabase(opts: { empty?: boolean; client?: boolean; pool?: boolean } = {}): DatabaseFixture {
  const fx = {} as DatabaseFixture;
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    db = opts.empty ? await createEmptyDatabase() : await createTestDatabase();
    Object.assign(fx, db);
    if (opts.pool) fx.owner = new pg.Pool({ connectionString: db.url, max: 2 });
    if (opts.client) {
      fx.client = new pg.Client({ connectionString: db.url });
      await fx.client.connect();
    }
  });
  afterAll(async () => {
    await fx.client?.end();
    if (fx.owner) await endPool(fx.owner);
    await db?.drop();
  });
  return fx;
}

/**
 * What this transaction has read so far from `tables` (pg_stat_xact_user_tables): sequential
 * scans, index scans, and rows read by the former and fetched through indexes. Take it before and
 * after a statement in the same transaction; the difference is the statement's.
 */
export async function xactReads(c: pg.ClientBase, tables: string[]): Promise<{ seq: number; idx: number; rows: number }> {
  const { rows: [r] } = await c.query(
    `select coalesce(sum(seq_scan), 0)::int as seq, coalesce(sum(idx_scan), 0)::int as idx,
            coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)::int as rows
       from pg_stat_xact_user_tables where relid = any ($1::regclass[])`, [tables]);
  return r as { seq: number; idx: number; rows: number };
}

/**
 * Every call of `GET calls` with `filters`, page after page through api.calls_list's cursors (the
 * connection's role must be one that may call it).
 */
export async function allCallPages(c: pg.ClientBase, tokenHash: string, location: string, filters: object, limit: number): Promise<Array<{ id: string; created_at: string }>> {
  const out: Array<{ id: string; created_at: string }> = [];
  let cursor: string | null = null;
  for (let i = 0; i < 1000; i++) {
    const page: { data: Array<{ id: string; created_at: string }>; next_cursor: string | null } = (await c.query(
      'select * from api.calls_list($1, $2, $3, $4)', [tokenHash, location, filters, cursor ? { limit, cursor } : { limit }])).rows[0];
    out.push(...page.data);
    cursor = page.next_cursor;
    if (!cursor) return out;
  }
  throw new Error('more than 1,000 pages');
}
