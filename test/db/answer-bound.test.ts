/**
 * A database that accepts connections but does not answer (its processes stopped, or a network
 * that swallows packets): every pool's queries are bounded on the client too, so an API request
 * answers 503 `unavailable` with Retry-After instead of waiting for the database, and the
 * connection is discarded (src/db/pools.ts; docs/operations.md "A database that does not answer").
 */
import { createApiPool, createOwnerPool, type StatementBound } from '../../src/db/pools.js';
import { toApiError } from '../../src/http/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { startDbProxy, type DbProxy } from '../support/db-proxy.js';
import { request, startTestApi, tenant, timed, waitFor, type TestApi } from '../support/harness.js';

/** Small, so the test waits little: the server cancels at 2 s, the client gives up at 2.5 s. */
const BOUND: StatementBound = { statementTimeoutMs: 2000, answerTimeoutMs: 2500 };

describe('API requests while the database does not answer', () => {
  let db: TestDatabase;
  let proxy: DbProxy;
  let api: TestApi;
  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await startDbProxy(db.url);
    api = await startTestApi({}, db, { through: { url: proxy.url, bound: BOUND } });
  });
  afterAll(async () => {
    proxy?.thaw();
    await api?.close();
    await proxy?.close();
  });

  test('answer 503 unavailable with Retry-After within the bound; a retry with the same Idempotency-Key makes one lead', async () => {
    // Setup: a tenant, and pooled connections already open (as on a running server).
    const { loc, token } = await tenant(api);
    await Promise.all([1, 2, 3, 4, 5].map(() => api.apiPool.query('select pg_sleep(0.1)')));
    const headers = { 'idempotency-key': 'lead-during-freeze' };
    const lead = { name: 'Frozen Fran', phone: '+15125550177' };
    proxy.freeze();

    // Action
    const [created, me] = await Promise.all([
      timed(request(api.baseUrl, 'POST', `/api/v1/locations/${loc.id}/leads`, { token, body: lead, headers })),
      timed(request(api.baseUrl, 'GET', '/api/v1/me', { token })),
    ]);

    // Assertions
    for (const { outcome, ms } of [created, me]) {
      expect(outcome).toMatchObject({ status: 503, body: { error: { code: 'unavailable' } } });
      expect((outcome as { headers: Headers }).headers.get('retry-after')).toBe('5');
      expect(ms).toBeGreaterThanOrEqual(BOUND.answerTimeoutMs! - 100);
      expect(ms).toBeLessThan(BOUND.answerTimeoutMs! + 2000);
    }
    proxy.thaw();
    const retried = await waitFor(async () => {
      const r = await request(api.baseUrl, 'POST', `/api/v1/locations/${loc.id}/leads`, { token, body: lead, headers });
      return r.status !== 409 && r.status !== 503 && r;
    }, 'the retry to be answered');
    expect(retried.status).toBe(201);
    const { rows } = await api.owner.query('select count(*)::int as n from app.leads where location_id = $1', [loc.id]);
    expect(rows[0].n).toBe(1);
  }, 30_000);
});

// Stops one backend process of the test cluster (SIGSTOP): the frozen server as it really is.
// Not possible against a TEST_DATABASE_URL on another machine.
const localCluster = process.env.TEST_DATABASE_URL ? test.skip : test;

describe('a transaction whose answer does not come', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db?.drop());

  localCluster('fails as unavailable within the bound, its connection is dropped, and the server rolls it back', async () => {
    // Setup: a transaction that wrote a row, on a backend then stopped.
    const owner = createOwnerPool(db.url, 2, 'test-owner');
    const pool = createOwnerPool(db.url, 1, 'test-bounded', BOUND);
    await owner.query('create table public.bound_probe (n int)');
    const client = await pool.connect();
    await client.query('begin');
    await client.query('insert into public.bound_probe values (1)');
    const pid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
    process.kill(pid, 'SIGSTOP');
    let failed: Awaited<ReturnType<typeof timed>>;
    let rollback: Awaited<ReturnType<typeof timed>>;
    try {
      // Action
      failed = await timed(client.query('insert into public.bound_probe values (2)'));
      rollback = await timed(client.query('rollback'));
      client.release();
    } finally {
      process.kill(pid, 'SIGCONT');
    }

    // Assertions
    const mapped = toApiError(failed.outcome);
    expect([mapped.status, mapped.code, mapped.headers]).toEqual([503, 'unavailable', { 'retry-after': '5' }]);
    expect(failed.ms).toBeGreaterThanOrEqual(BOUND.answerTimeoutMs! - 100);
    expect(failed.ms).toBeLessThan(BOUND.answerTimeoutMs! + 2000);
    // The client is ending: the rollback fails at once instead of waiting out the bound again.
    expect(rollback.outcome).toBeInstanceOf(Error);
    expect(rollback.ms).toBeLessThan(500);
    expect(pool.totalCount).toBe(0);
    // Resumed, the backend reads the closed connection, ends, and its transaction is rolled back.
    await waitFor(async () => (await owner.query('select 1 from pg_stat_activity where pid = $1', [pid])).rowCount === 0, 'the backend to end');
    expect((await owner.query('select count(*)::int as n from public.bound_probe')).rows[0].n).toBe(0);
    // The pool makes a new connection for the next query.
    expect((await pool.query('select 1 as one')).rows[0].one).toBe(1);
    await pool.end();
    await owner.end();
  }, 30_000);
});

test('the API pool cancels on the server at 15 s and gives up on the client 5 s later', () => {
  // Setup / Action
  const pool = createApiPool('postgres://x@127.0.0.1:1/x');
  const { options, query_timeout, keepAlive, connectionTimeoutMillis } = (pool as unknown as { options: Record<string, unknown> }).options;
  // Assertions
  expect([options, query_timeout, keepAlive, connectionTimeoutMillis]).toEqual(['-c role=switchboard_api -c statement_timeout=15000', 20_000, true, 5000]);
  void pool.end();
});
