/**
 * A statement the database cancels at its statement_timeout, or rolls back as a deadlock's or a
 * serialisation's victim, is not the client's mistake nor ours to hide behind a 500: the whole
 * transaction was rolled back, so the request answers 503 `unavailable` with Retry-After, and a
 * retry does what the first try would have (src/http/errors.ts; docs/operations.md "A database
 * that does not answer").
 */
import { toApiError } from '../../src/http/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { memoryLog, request, startTestApi, tenant, type TestApi } from '../support/harness.js';

describe('a request whose statement the database cancels', () => {
  let db: TestDatabase;
  let api: TestApi;
  const memory = memoryLog();
  beforeAll(async () => {
    db = await createTestDatabase();
    // The server cancels at 1 s; the client would wait 10 s for an answer that never comes.
    api = await startTestApi({}, db, { through: { url: db.url, bound: { statementTimeoutMs: 1000, answerTimeoutMs: 10_000 } }, log: memory.log });
  });
  afterAll(() => api?.close());

  test('answers 503 unavailable with Retry-After, changes nothing, and the retry is served', async () => {
    // Setup: a tenant, and a lock on the leads table held by another session (a long migration, say).
    const { loc, token } = await tenant(api);
    const headers = { 'idempotency-key': 'lead-behind-a-lock' };
    const lead = { name: 'Locked Lou', phone: '+15125550178' };
    const holder = await api.owner.connect();
    await holder.query('begin');
    await holder.query('lock table app.leads in access exclusive mode');

    // Action
    let first: Awaited<ReturnType<typeof request>>;
    try {
      first = await request(api.baseUrl, 'POST', `/api/v1/locations/${loc.id}/leads`, { token, body: lead, headers });
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    const retried = await request(api.baseUrl, 'POST', `/api/v1/locations/${loc.id}/leads`, { token, body: lead, headers });

    // Assertions
    expect(first).toMatchObject({ status: 503, body: { error: { code: 'unavailable' } } });
    expect(first.headers.get('retry-after')).toBe('5');
    expect(retried.status).toBe(201);
    const { rows } = await api.owner.query('select count(*)::int as n from app.leads where location_id = $1', [loc.id]);
    expect(rows[0].n).toBe(1);
    // One warning naming the SQLSTATE and the access line's short cause; not the outage warning,
    // not an error with a stack.
    const records = memory.records();
    expect(records.filter((r) => r.cause === '57014' && r.level === 40 && /rolled the request back/.test(r.msg))).toHaveLength(1);
    expect(records.filter((r) => r.res?.statusCode === 503).map((r) => r.err)).toEqual([{ code: 'unavailable', cause: '57014' }]);
    expect(records.filter((r) => /database unavailable|request failed/.test(r.msg ?? '') || r.err?.stack)).toEqual([]);
  }, 30_000);
});

test.each(['57014', '40P01', '40001'])('SQLSTATE %s maps to 503 unavailable with Retry-After', (code) => {
  // Setup / Action
  const mapped = toApiError(Object.assign(new Error('rolled back'), { code }));
  // Assertions
  expect([mapped.status, mapped.code, mapped.headers]).toEqual([503, 'unavailable', { 'retry-after': '5' }]);
});
