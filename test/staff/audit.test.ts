/**
 * The staff audit (docs/staff.md "Audit"): one row per authenticated staff GraphQL request with
 * exactly who, which role, which operation, the document's SHA-256, the root fields, the
 * locations it named, the outcome; never a variable value or a result. Append-only: nobody updates
 * or deletes rows except the retention prune (STAFF_AUDIT_RETENTION_DAYS).
 */
import { createHash } from 'node:crypto';
import { loadConfig } from '../../src/config.js';
import { pruneStaffAudit } from '../../src/staff/retention.js';
import { startStaffEnv, type StaffEnv } from './support.js';

let env: StaffEnv;
beforeAll(async () => {
  env = await startStaffEnv({ limits: { maxDepth: 6 } });
}, 60_000);
afterAll(async () => env?.close());
beforeEach(async () => {
  await env.staff.flushAudit();
  await env.owner.query("select set_config('staff.audit_prune', 'on', false); delete from staff.audit; select set_config('staff.audit_prune', 'off', false)");
});

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

test('a request leaves exactly who, what and where, and none of its variable values or results', async () => {
  const operator = await env.member('operator');
  const query = `query CallsOfCaller($loc: UUID!, $phone: E164!, $other: UUID!) {
    allCalls(condition: { locationId: $loc }) { totalCount nodes { transcript callerEmail } }
    locationByRowId(rowId: $other) { name }
    customerByLocationIdAndPhone(locationId: "${env.seed.locations.a}", phone: $phone) { email }
  }`;
  const variables = { loc: env.seed.locations.a, phone: env.seed.caller.phone, other: env.seed.locations.b };
  const r = await env.gql(operator.token, query, variables);
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.allCalls.totalCount).toBe(1);
  const rows = await env.audit();
  expect(rows).toEqual([{
    member_id: operator.id, role: 'operator', operation_name: 'CallsOfCaller', operation_type: 'query', document_sha256: sha(query),
    root_fields: ['allCalls', 'locationByRowId', 'customerByLocationIdAndPhone'],
    location_ids: [env.seed.locations.a, env.seed.locations.b].sort(), outcome: 'ok', http_status: 200, error_count: 0,
    duration_ms: expect.any(Number),
  }].map((x) => ({ ...x, location_ids: expect.arrayContaining(x.location_ids) })));
  expect(rows[0].location_ids).toHaveLength(2);
  // Nothing of the variables (phone) or of the results (transcript, e-mail) is stored anywhere in the row.
  const text = JSON.stringify((await env.owner.query('select to_jsonb(a) as j from staff.audit a')).rows);
  for (const v of [env.seed.caller.phone, env.seed.caller.phone.slice(2), env.seed.caller.email, env.seed.caller.transcript, 'Pat Caller']) expect(text).not.toContain(v);
});

test('failures are recorded too: permission denied is an error, past the depth bound is rejected, a mutation names its location', async () => {
  const viewer = await env.member('viewer');
  const admin = await env.member('admin');
  const denied = '{ allCalls { nodes { transcript } } }';
  const deep = '{ allCalls { nodes { locationByLocationId { callsByLocationId { nodes { locationByLocationId { callsByLocationId { nodes { rowId } } } } } } } } }';
  const rename = `mutation { updateLocationByRowId(input: { rowId: "${env.seed.locations.b}", locationPatch: { timezone: "America/Chicago" } }) { location { rowId } } }`;
  expect((await env.gql(viewer.token, denied)).body.errors[0].extensions.code).toBe('FORBIDDEN');
  const tooDeep = await env.gql(admin.token, deep);
  expect(tooDeep.body.errors[0].message).toMatch(/depth/i);
  expect((await env.gql(admin.token, rename)).body.errors).toBeUndefined();
  const rows = await env.audit();
  expect(rows.map(({ duration_ms: _d, http_status: _h, ...r }) => r)).toEqual([
    { member_id: viewer.id, role: 'viewer', operation_name: null, operation_type: 'query', document_sha256: sha(denied), root_fields: ['allCalls'], location_ids: [], outcome: 'error', error_count: 1 },
    { member_id: admin.id, role: 'admin', operation_name: null, operation_type: null, document_sha256: sha(deep), root_fields: [], location_ids: [], outcome: 'rejected', error_count: 0 },
    { member_id: admin.id, role: 'admin', operation_name: null, operation_type: 'mutation', document_sha256: sha(rename), root_fields: ['updateLocationByRowId'], location_ids: [env.seed.locations.b], outcome: 'ok', error_count: 0 },
  ]);
});

test('admins read the audit through GraphQL and answer "who looked at this location"', async () => {
  const operator = await env.member('operator', 'ops@staff.example.net');
  const admin = await env.member('admin');
  await env.gql(operator.token, 'query Peek($loc: UUID!) { allCalls(condition: { locationId: $loc }) { nodes { transcript } } }', { loc: env.seed.locations.a });
  await env.staff.flushAudit();
  const r = await env.gql(admin.token, `query($m: UUID!) { allStaffAudits(condition: { memberId: $m }) { nodes { memberId operationName rootFields locationIds outcome staffMemberByMemberId { email } } } }`, { m: operator.id });
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.allStaffAudits.nodes).toEqual([{ memberId: operator.id, operationName: 'Peek', rootFields: ['allCalls'], locationIds: [env.seed.locations.a], outcome: 'ok', staffMemberByMemberId: { email: 'ops@staff.example.net' } }]);
});

test('append-only: no update or delete, not even by the owner; only the prune removes rows past retention', async () => {
  const admin = await env.member('admin');
  await env.gql(admin.token, '{ allLocations { totalCount } }');
  await env.staff.flushAudit();
  await expect(env.owner.query("update staff.audit set outcome = 'error'")).rejects.toMatchObject({ code: 'SB409' });
  await expect(env.owner.query('delete from staff.audit')).rejects.toMatchObject({ code: 'SB409' });
  await expect(env.owner.query('truncate staff.audit')).rejects.toMatchObject({ code: 'SB409' });
  const c = await env.owner.connect();
  try {
    await c.query('begin; set local role switchboard_staff_admin');
    await expect(c.query("update staff.audit set outcome = 'error'")).rejects.toMatchObject({ code: '42501' });
    await c.query('rollback');
  } finally {
    c.release();
  }
  // An old row and a recent one: the prune (as the worker runs it) removes the old one only.
  await env.owner.query(`insert into staff.audit (at, member_id, role, outcome, duration_ms) values (now() - interval '366 days', $1, 'admin', 'ok', 1)`, [admin.id]);
  const cfg = loadConfig({ STAFF_AUDIT_RETENTION_DAYS: '365' });
  expect(await pruneStaffAudit({ cfg, pool: env.owner })).toBe(1);
  const left = (await env.owner.query("select count(*)::int as n, min(at) > now() - interval '1 day' as recent from staff.audit")).rows[0];
  expect(left).toEqual({ n: 1, recent: true });
  expect(await pruneStaffAudit({ cfg: loadConfig({}), pool: env.owner })).toBe(0);
});
