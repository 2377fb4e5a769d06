/**
 * A statement the database refuses (an error it reports while the session goes on) leaves its
 * pooled connection in the pool: a client's mistakes answered from SQL (another location's 404, a
 * malformed cursor's 400) do not make the server fork a backend for the next request. A broken
 * session still closes its connection (src/db/pools.ts, KeepingPool).
 */
import { createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { request, startTestApi, tenant, waitFor, type TestApi } from '../support/harness.js';

const pidOf = async (pool: ReturnType<typeof createOwnerPool>) => (await pool.query({ text: 'select pg_backend_pid() as pid', values: [] })).rows[0].pid as number;

describe('the pools', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });

  test('a refused statement sent with parameters keeps its connection, idle and usable', async () => {
    const pool = createOwnerPool(db.url, 1);
    try {
      const pid = await pidOf(pool);
      await expect(pool.query('select 1 / $1::int', [0])).rejects.toMatchObject({ code: '22012' });
      await expect(pool.query({ name: 'refused', text: 'select $1::uuid', values: ['not-a-uuid'] })).rejects.toMatchObject({ code: '22P02' });
      await expect(pool.query({ text: 'select 1 / 0', values: [] })).rejects.toMatchObject({ code: '22012' });
      expect(await pidOf(pool)).toBe(pid);
      const { rows } = await pool.query('select current_setting($1) as s, now() = statement_timestamp() as fresh', ['transaction_isolation']);
      expect(rows[0]).toEqual({ s: 'read committed', fresh: false });
      expect(pool.totalCount).toBe(1);
    } finally {
      await pool.end();
    }
  });

  test('a simple-protocol string, which may leave a transaction open, still closes its connection on an error', async () => {
    const pool = createOwnerPool(db.url, 1);
    try {
      const pid = await pidOf(pool);
      await expect(pool.query('begin; select 1 / 0; commit')).rejects.toMatchObject({ code: '22012' });
      const next = await pidOf(pool);
      expect(next).not.toBe(pid);
      // The new connection is outside any transaction: its statements commit on their own.
      const { rows } = await pool.query({ text: `select pg_current_xact_id_if_assigned() is null as idle`, values: [] });
      expect(rows[0].idle).toBe(true);
    } finally {
      await pool.end();
    }
  });

  test('a session the server ends (FATAL) is not handed out again', async () => {
    const pool = createOwnerPool(db.url, 1);
    const watcher = createOwnerPool(db.url, 1);
    try {
      const pid = await pidOf(pool);
      await expect(pool.query('select pg_terminate_backend(pg_backend_pid(), $1)', [0])).rejects.toMatchObject({ code: '57P01' });
      expect(await pidOf(pool)).not.toBe(pid);
      // Gone from the server too (its entry is cleared as it exits, just after sending the FATAL).
      await waitFor(async () => (await watcher.query('select count(*)::int as n from pg_stat_activity where pid = $1', [pid])).rows[0].n === 0,
        'the ended session to leave pg_stat_activity', 5000);
    } finally {
      await pool.end();
      await watcher.end();
    }
  });

  test('the API pool keeps its connection through a refused call too', async () => {
    const pool = createApiPool(db.url, 1);
    try {
      const pid = await pidOf(pool);
      await expect(pool.query('select app.authorize($1, $2, $3)', ['0'.repeat(64), null, null])).rejects.toMatchObject({ code: expect.any(String) });
      expect(await pidOf(pool)).toBe(pid);
    } finally {
      await pool.end();
    }
  });

  afterAll(async () => {
    await db?.drop();
  });
});

describe('through the API', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi();
  });
  afterAll(() => api?.close());

  test('refusals answered from SQL (404 for another location, 400 for a malformed cursor) open no new backend', async () => {
    const { loc, token } = await tenant(api);
    const other = await tenant(api);
    const L = `/api/v1/locations/${loc.id}`;
    // Warm: the pool holds what a running server holds.
    for (let i = 0; i < 3; i++) expect((await request(api.baseUrl, 'GET', `${L}/leads`, { token })).status).toBe(200);
    const backends = async () => (await api.owner.query(
      `select array_agg(pid order by pid) as pids from pg_stat_activity where application_name = 'switchboard-api' and datname = current_database()`)).rows[0].pids as number[];
    const before = await backends();
    expect(before.length).toBeGreaterThan(0);
    for (let i = 0; i < 20; i++) {
      expect((await request(api.baseUrl, 'GET', `/api/v1/locations/${other.loc.id}/leads`, { token })).status).toBe(404);
      expect((await request(api.baseUrl, 'GET', `${L}/leads?cursor=-1`, { token })).status).toBe(400);
      expect((await request(api.baseUrl, 'GET', `${L}/leads`, { token })).status).toBe(200);
    }
    // A discarded connection is a backend gone and a new one made for the next request (40 of each
    // before the fix). The pool may still grow by a connection for a query run beside a request's.
    const after = await backends();
    expect(before.filter((pid) => !after.includes(pid))).toEqual([]);
    expect(after.filter((pid) => !before.includes(pid)).length).toBeLessThan(3);
  });
});
