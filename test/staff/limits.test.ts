/**
 * Protection of the database (docs/staff.md "Timeouts and bounds"): a document past the depth or
 * cost bound is refused with a clear GraphQL error before anything runs; every staff statement
 * runs under the staff statement_timeout; and binding the admin listener beyond loopback warns.
 */
import { pino } from 'pino';
import { startStaffGraphql } from '../../src/admin/graphql.js';
import { startStaffEnv, type StaffEnv } from './support.js';

let env: StaffEnv;
let admin: { id: string; token: string };
beforeAll(async () => {
  env = await startStaffEnv({ limits: { maxDepth: 6, maxCost: 300, statementTimeoutMs: 300 } });
  admin = await env.member('admin');
}, 60_000);
afterAll(async () => env?.close());

test('a document deeper than the bound is refused with a clear error, and one within it runs', async () => {
  const ok = await env.gql(admin.token, '{ allCalls { nodes { locationByLocationId { callsByLocationId { totalCount } } } } }');
  expect(ok.body.errors).toBeUndefined();
  const deep = await env.gql(admin.token, '{ allCalls { nodes { locationByLocationId { callsByLocationId { nodes { locationByLocationId { callsByLocationId { nodes { rowId } } } } } } } } }');
  expect(deep.body.data).toBeUndefined();
  expect(deep.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/Query depth limit of 6 exceeded, found \d+/) })]);
});

test('a document costlier than the bound is refused with a clear error', async () => {
  const wide = `{ ${Array.from({ length: 40 }, (_, i) => `a${i}: allCalls { totalCount nodes { rowId outcome durationSec } }`).join(' ')} }`;
  const r = await env.gql(admin.token, wide);
  expect(r.body.data).toBeUndefined();
  expect(r.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/Query Cost limit of 300 exceeded, found \d+/) })]);
  await env.staff.flushAudit();
  const rows = await env.audit();
  expect(rows.at(-1)).toMatchObject({ outcome: 'rejected', root_fields: [] });
});

test('staff statements run under the staff statement_timeout', async () => {
  // A lock held elsewhere makes the staff query wait; the 300 ms staff timeout cancels it.
  const holder = await env.owner.connect();
  try {
    await holder.query('begin');
    await holder.query('lock table app.calls in access exclusive mode');
    const r = await env.gql(admin.token, '{ allCalls { totalCount } }');
    expect(r.body.errors).toEqual([expect.objectContaining({ extensions: { code: 'STATEMENT_TIMEOUT' }, message: expect.stringMatching(/staff statement timeout/) })]);
  } finally {
    await holder.query('rollback');
    holder.release();
  }
  const after = await env.gql(admin.token, '{ allCalls { totalCount } }');
  expect(after.body).toEqual({ data: { allCalls: { totalCount: 2 } } });
});

test('binding the admin listener beyond loopback logs a warning naming what is exposed; loopback does not', async () => {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(s) });
  const open = await startStaffGraphql(env.db.url, '0.0.0.0', 0, { log });
  await open.close();
  const warnings = lines.map((l) => JSON.parse(l)).filter((l) => l.level === 40);
  expect(warnings).toHaveLength(1);
  expect(warnings[0].admin_host).toBe('0.0.0.0');
  expect(warnings[0].msg).toMatch(/staff GraphQL/);
  expect(warnings[0].msg).toMatch(/every location's data/);
  expect(warnings[0].msg).toMatch(/metrics/);
  expect(warnings[0].msg).toMatch(/TLS/);
  lines.length = 0;
  const local = await startStaffGraphql(env.db.url, '127.0.0.1', 0, { log });
  await local.close();
  expect(lines.map((l) => JSON.parse(l)).filter((l) => l.level >= 40)).toEqual([]);
});
