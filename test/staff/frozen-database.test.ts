/**
 * The staff GraphQL in front of a database that accepts connections but does not answer (its
 * processes stopped, a network that swallows packets): its pools give up past their bound, the
 * request answers a clear UNAVAILABLE error and gives its turn back, and once the database answers
 * again staff are served (src/staff/access.ts; docs/operations.md "A database that does not answer").
 */
import type { StatementBound } from '../../src/db/pools.js';
import { createTestDatabase } from '../support/db.js';
import { startDbProxy, type DbProxy } from '../support/db-proxy.js';
import { waitFor } from '../support/harness.js';
import { startStaffEnv, type StaffEnv } from './support.js';

/** The staff statement timeout of this test: the client gives up 5 s (ANSWER_MARGIN_MS) later. */
const STATEMENT_TIMEOUT_MS = 1000;
/** The token look-ups' and audit writes' bound, shorter than the service's (REQUEST_BOUND) for the test. */
const LOOKUP_BOUND: StatementBound = { statementTimeoutMs: 1000, answerTimeoutMs: 2000 };

let env: StaffEnv;
let proxy: DbProxy;
beforeAll(async () => {
  const db = await createTestDatabase();
  proxy = await startDbProxy(db.url);
  env = await startStaffEnv({ db, through: proxy.url, limits: { statementTimeoutMs: STATEMENT_TIMEOUT_MS, maxRunning: 1, maxQueued: 1 }, lookupBound: LOOKUP_BOUND });
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
  const started = Date.now();
  const frozen = await Promise.race([
    env.gql(admin.token, query),
    new Promise<'no answer'>((r) => setTimeout(r, 15_000, 'no answer')),
  ]);
  const ms = Date.now() - started;
  proxy.thaw();

  // Assertions
  expect(frozen).not.toBe('no answer');
  const answer = frozen as Exclude<typeof frozen, 'no answer'>;
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
  const started = Date.now();
  const frozen = await Promise.race([
    env.gql(viewer.token, '{ allCalls { totalCount } }'),
    new Promise<'no answer'>((r) => setTimeout(r, 15_000, 'no answer')),
  ]);
  const ms = Date.now() - started;
  proxy.thaw();

  // Assertions
  expect(frozen).not.toBe('no answer');
  const answer = frozen as Exclude<typeof frozen, 'no answer'>;
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
