/**
 * The staff GraphQL in front of a database that accepts connections but does not answer (its
 * processes stopped, a network that swallows packets): its pools give up past their bound, the
 * request answers a clear UNAVAILABLE error and gives its turn back, and once the database answers
 * again staff are served (src/staff/access.ts; docs/operations.md "A database that does not answer").
 */
import type { StatementBound } from '../../src/db/pools.js';
import { createTestDatabase } from '../support/db.js';
import { startDbProxy, type DbProxy } from '../support/db-proxy.js';
import { memoryLog, timed, waitFor } from '../support/harness.js';
import { startStaffEnv, type StaffEnv } from './support.js';

/** The staff statement timeout of this test: the client gives up 5 s (ANSWER_MARGIN_MS) later. */
const STATEMENT_TIMEOUT_MS = 1000;
/** The token look-ups' and audit writes' bound, shorter than the service's (REQUEST_BOUND) for the test. */
const LOOKUP_BOUND: StatementBound = { statementTimeoutMs: 1000, answerTimeoutMs: 2000 };

let env: StaffEnv;
let proxy: DbProxy;
const logged = memoryLog();
beforeAll(async () => {
  const db = await createTestDatabase();
  proxy = await startDbProxy(db.url);
  env = await startStaffEnv({ db, through: proxy.url, limits: { statementTimeoutMs: STATEMENT_TIMEOUT_MS, maxRunning: 1, maxQueued: 1 }, lookupBound: LOOKUP_BOUND,
    log: logged.log });
});
afterAll(async () => {
  proxy?.thaw();
  await env?.close();
  await proxy?.close();
});

test('a staff query answers UNAVAILABLE within its bound, gives its turn back, and staff are served after the thaw', async () => {
  // Setup: a member whose token is cached and a schema already loaded, as on a running server.
  const admin = await env.member('admin');
  const query = '{ allCalls { totalCount } }';
  expect((await env.gql(admin.token, query)).body.data.allCalls.totalCount).toBe(2);
  // Only PostGraphile's connections stop answering: the token look-up still passes.
  proxy.freeze('switchboard-staff-graphql');

  // Action
  const { outcome: frozen, ms } = await timed(env.gql(admin.token, query), 15_000);
  // The audit pool still answers: the request's row is written before the thaw.
  const rows = await env.audit();
  proxy.thaw();

  // Assertions
  expect(frozen).not.toBe('no answer');
  const answer = frozen as Exclude<typeof frozen, 'no answer' | Error>;
  expect(rows.at(-1)).toMatchObject({ member_id: admin.id, outcome: 'error', error_count: 1, root_fields: ['allCalls'] });
  expect(answer.body.errors.map((e: { extensions: { code: string } }) => e.extensions.code)).toEqual(['UNAVAILABLE']);
  expect(answer.text).not.toMatch(/Query read timeout/);
  expect(ms).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS + 5000 - 200);
  // Its turn came back (one running, one queued): two requests in a row are served.
  const after = await waitFor(async () => {
    const r = await env.gql(admin.token, query);
    return r.body?.data?.allCalls && r;
  }, 'staff to be served again');
  expect(after.body.data.allCalls.totalCount).toBe(2);
  expect((await env.gql(admin.token, query)).body.data.allCalls.totalCount).toBe(2);
}, 40_000);

test('a token not yet cached answers 503 unavailable once the look-up\'s bound has passed', async () => {
  // Setup: a member minted while the database answers, whose token the server has never seen.
  const viewer = await env.member('viewer', 'fresh-viewer@staff.example.net');
  proxy.freeze();

  // Action
  const { outcome: frozen, ms } = await timed(env.gql(viewer.token, '{ allCalls { totalCount } }'), 15_000);
  proxy.thaw();

  // Assertions
  expect(frozen).not.toBe('no answer');
  const answer = frozen as Exclude<typeof frozen, 'no answer' | Error>;
  expect(answer.status).toBe(503);
  expect(answer.body.error.code).toBe('unavailable');
  expect(answer.headers.get('retry-after')).toBe('5');
  expect(ms).toBeGreaterThanOrEqual(LOOKUP_BOUND.answerTimeoutMs! - 200);
  const served = await waitFor(async () => {
    const r = await env.gql(viewer.token, '{ allCalls { totalCount } }');
    return r.status === 200 && r;
  }, 'the viewer to be served');
  expect(served.body.data.allCalls.totalCount).toBe(2);
}, 40_000);

test('an audit batch the database does not answer is given up at its bound and logged with its rows; the answer does not wait', async () => {
  // Setup: an operator whose token was looked up just now (staff tokens are cached for a second
  // from the start of their look-up), the rows so far written; then only the look-up and audit
  // pool stops answering. The frozen request must find the token cached: on a busy machine the
  // warm-up and the audit flush can outlast the second, so they are done again, each time after
  // the last look-up has expired (a request then reads the token afresh), until they fit.
  const operator = await env.member('operator', 'audit-frozen@staff.example.net');
  const count = async (name: string) => (await env.audit()).filter((r) => r.member_id === operator.id && r.operation_name === name).length;
  for (let tries = 1; ; tries++) {
    const warmedAt = Date.now();
    expect((await env.gql(operator.token, 'query Warm { allCalls { totalCount } }')).body.data.allCalls.totalCount).toBe(2);
    await env.audit();
    if (Date.now() - warmedAt < 500 || tries === 5) break;
    await new Promise((r) => setTimeout(r, 1100));
  }
  proxy.freeze('switchboard-staff');

  // Action
  const started = Date.now();
  const answer = await env.gql(operator.token, 'query FrozenAudit { allCalls { totalCount } }');
  const answeredMs = Date.now() - started;
  const line = await waitFor(async () => logged.records().find((r) => r.msg === 'staff audit rows not written'),
    'the audit batch to be given up', LOOKUP_BOUND.answerTimeoutMs! + 5000);
  const givenUpMs = Date.now() - started;
  proxy.thaw();

  // Assertions
  expect(answer.body.data.allCalls.totalCount).toBe(2);
  expect(answeredMs).toBeLessThan(LOOKUP_BOUND.answerTimeoutMs!);
  expect(givenUpMs).toBeGreaterThanOrEqual(LOOKUP_BOUND.answerTimeoutMs! - 200);
  expect(line.level).toBe(50);
  expect(line.rows).toBe(1);
  expect(line.audit_rows).toEqual([expect.objectContaining({
    member_id: operator.id, role: 'operator', operation_name: 'FrozenAudit', outcome: 'ok', root_fields: ['allCalls'] })]);
  // Not tried again: the INSERT the relay held reaches the server on the thaw and lands once.
  await waitFor(async () => (await count('FrozenAudit')) === 1, 'the held INSERT to land');
  expect((await env.gql(operator.token, 'query AfterThaw { allCalls { totalCount } }')).body.data.allCalls.totalCount).toBe(2);
  expect(await count('AfterThaw')).toBe(1);
  expect(await count('FrozenAudit')).toBe(1);
}, 40_000);
