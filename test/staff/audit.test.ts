/**
 * The staff audit (docs/staff.md "Audit"): one row per authenticated staff GraphQL request with
 * exactly who, which role, which operation, the document's SHA-256, the root fields, the
 * locations it named, the outcome; never a variable value or a result. Append-only: nobody updates
 * or deletes rows except the retention prune (STAFF_AUDIT_RETENTION_DAYS).
 */
import { createHash } from 'node:crypto';
import { loadConfig } from '../../src/config.js';
import { auditOutcome } from '../../src/staff/access.js';
import { pruneStaffAudit } from '../../src/staff/retention.js';
import { waitingOnLock } from '../support/harness.js';
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

test('a request with one field across locations is audited as across locations, whatever its other fields name', async () => {
  const operator = await env.member('operator');
  const { a, b } = env.seed.locations;
  const fetched = await env.gql(operator.token, `query Fetch { allCalls(condition: { locationId: "${b}" }, first: 1) { nodes { id } } }`);
  const nodeId = fetched.body.data.allCalls.nodes[0].id as string;
  const documents = [
    // Scoped by A, beside a list of every location's customers.
    `query Mixed { allCalls(condition: { locationId: "${a}" }) { totalCount } allCustomers(first: 5) { nodes { locationId } } }`,
    // A record fetched by its global id, beside a field that names A.
    `query ById($id: ID!) { locationByRowId(rowId: "${a}") { name } node(id: $id) { id } }`,
    // B's calls reached through B's location: scoped to B.
    `query ViaLocation { locationByRowId(rowId: "${b}") { callsByLocationId { totalCount } } }`,
  ];
  for (const q of documents) expect((await env.gql(operator.token, q, { id: nodeId })).body.errors).toBeUndefined();
  const rows = await env.audit();
  expect(rows.map((r) => [r.operation_name, r.location_ids])).toEqual([['Fetch', [b]], ['Mixed', []], ['ById', []], ['ViaLocation', [b]]]);
});

test('a mutation whose payload reads through `query` is audited as across locations', async () => {
  const admin = await env.member('admin');
  const { a, b } = env.seed.locations;
  const create = (n: number, payload: string) => `mutation Probe${n} { createFaq(input: { faq: { locationId: "${a}", question: "q${n}?", answer: "a" } }) { ${payload} } }`;
  const probe = await env.gql(admin.token, create(7, 'query { allCalls(first: 10) { nodes { locationId } } }'));
  // It read B's calls while naming only A.
  expect(probe.body.data.createFaq.query.allCalls.nodes).toContainEqual({ locationId: b });
  const viaFragment = await env.gql(admin.token, create(8, '...Back') + ' fragment Back on CreateFaqPayload { back: query { allLocations { totalCount } } }');
  expect(viaFragment.body.errors).toBeUndefined();
  expect((await env.gql(admin.token, create(9, 'faq { rowId }'))).body.errors).toBeUndefined();
  const rows = await env.audit();
  expect(rows.map((r) => [r.operation_name, r.location_ids])).toEqual([['Probe7', []], ['Probe8', []], ['Probe9', [a]]]);
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
    { member_id: admin.id, role: 'admin', operation_name: null, operation_type: 'query', document_sha256: sha(deep), root_fields: [], location_ids: [], outcome: 'rejected', error_count: 0 },
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

/** A POST to the staff GraphQL with an operationName and an optional abort signal. */
const post = (token: string, body: Record<string, unknown>, signal?: AbortSignal) =>
  fetch(`${env.staff.url}/graphql`, {
    method: 'POST', signal,
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });

test('the operation name recorded is the one the document defines, never the client\'s free text', async () => {
  const admin = await env.member('admin');
  await post(admin.token, { query: 'query Real { allLocations { totalCount } }', operationName: 'Real' });
  // No operation of that name: nothing runs (GraphQL's rule), and the free text is not kept.
  await post(admin.token, { query: '{ allLocations { totalCount } }', operationName: 'Dana Whitfield +15125550143' });
  await post(admin.token, { query: 'query Real { allLocations { totalCount } }', operationName: 'Not in the document' });
  await post(admin.token, { query: 'query A { allLocations { totalCount } } query B { allCalls { totalCount } }', operationName: 'B' });
  // An empty name is a name (GraphQL looks for an operation called ""), not "none given".
  const empty = await post(admin.token, { query: 'query Real { allLocations { totalCount } }', operationName: '' });
  expect(((await empty.json()) as { errors: { message: string }[] }).errors[0].message).toMatch(/Unknown operation named ""/);
  const rows = await env.audit();
  expect(rows.map((r) => [r.operation_name, r.root_fields])).toEqual([['Real', ['allLocations']], [null, []], [null, []], ['B', ['allCalls']], [null, []]]);
  // Nothing ran for the three that named no operation of the document: refused, not an error.
  expect(rows.map((r) => [r.outcome, r.error_count])).toEqual([['ok', 0], ['rejected', 0], ['rejected', 0], ['ok', 0], ['rejected', 0]]);
  const text = JSON.stringify((await env.owner.query('select to_jsonb(a) as j from staff.audit a')).rows);
  expect(text).not.toContain('Dana');
  expect(text).not.toContain('Not in the document');
});

test('a document that parses but fails validation is rejected with a 400 and audited with its operation\'s name', async () => {
  const admin = await env.member('admin');
  const res = await post(admin.token, { query: 'query Typo { allCalls { noSuchField } }' });
  expect(res.status).toBe(400);
  expect(((await res.json()) as { errors: { message: string }[] }).errors[0].message).toMatch(/noSuchField/);
  const rows = await env.audit();
  expect(rows).toEqual([expect.objectContaining({ operation_name: 'Typo', operation_type: 'query', outcome: 'rejected', http_status: 400, root_fields: [] })]);
});

/** Waits until a staff backend is waiting for a lock. */
const staffWaitingForLock = () => waitingOnLock(env.owner, { application: 'switchboard-staff-graphql' });

test('a client gone during execution: a write that committed is client_gone, never rejected; so is a read that ran in full', async () => {
  const admin = await env.member('admin');
  const loc = env.seed.locations.b;
  const holder = await env.owner.connect();
  try {
    // The mutation waits for a row lock; the client hangs up meanwhile; then the lock is released.
    await holder.query('begin');
    await holder.query('select 1 from app.locations where id = $1 for update', [loc]);
    const abort = new AbortController();
    const sent = post(admin.token, { query: `mutation Move { updateLocationByRowId(input: { rowId: "${loc}", locationPatch: { timezone: "America/Phoenix" } }) { location { rowId } } }` }, abort.signal).catch((e: Error) => e);
    await staffWaitingForLock();
    abort.abort();
    expect(await sent).toMatchObject({ name: 'AbortError' });
    await new Promise((r) => setTimeout(r, 100));
    await holder.query('commit');
    // The mutation's turn is given back once it has ended (STAFF_MAX_RUNNING is 1): the read must
    // not wait behind it while the table lock below is held.
    await env.staff.flushAudit();
    // The same with a read behind a table lock.
    await holder.query('begin');
    await holder.query('lock table app.calls in access exclusive mode');
    const abortRead = new AbortController();
    const read = post(admin.token, { query: 'query Slow { allCalls { totalCount } }' }, abortRead.signal).catch((e: Error) => e);
    await staffWaitingForLock();
    abortRead.abort();
    expect(await read).toMatchObject({ name: 'AbortError' });
    await new Promise((r) => setTimeout(r, 100));
    await holder.query('commit');
  } finally {
    holder.release();
  }
  const rows = await env.audit();
  expect((await env.owner.query('select timezone from app.locations where id = $1', [loc])).rows[0].timezone).toBe('America/Phoenix');
  expect(rows.map((r) => [r.operation_name, r.outcome, r.error_count, r.root_fields]).sort()).toEqual([
    ['Move', 'client_gone', 0, ['updateLocationByRowId']],
    ['Slow', 'client_gone', 0, ['allCalls']],
  ]);
  // "Who looked at this caller" counts them (docs/staff.md): they ran.
  const { rows: looked } = await env.owner.query(`select count(*)::int as n from staff.audit where outcome in ('ok', 'client_gone')`);
  expect(looked[0].n).toBe(2);
}, 30_000);

test('outcomes: refused before execution, executed and delivered, executed with errors, client gone after execution', () => {
  expect(auditOutcome(null, true)).toBe('rejected');
  expect(auditOutcome(null, false)).toBe('rejected');
  expect(auditOutcome({ errors: 0, refused: false, ran: true }, true)).toBe('ok');
  expect(auditOutcome({ errors: 2, refused: false, ran: true }, true)).toBe('error');
  expect(auditOutcome({ errors: 0, refused: false, ran: true }, false)).toBe('client_gone');
  expect(auditOutcome({ errors: 1, refused: false, ran: true }, false)).toBe('client_gone');
  // A request error (variables that do not coerce): nothing ran.
  expect(auditOutcome({ errors: 1, refused: true, ran: false }, true)).toBe('rejected');
});

test('variables that do not coerce, or a required one missing, are a 400 audited rejected with no root fields: nothing ran', async () => {
  const admin = await env.member('admin', 'vars@staff.example.net');
  const query = 'query BadVar($id: UUID!) { locationByRowId(rowId: $id) { rowId } }';
  for (const variables of [{ id: 'nope' }, {}]) {
    const r = await env.gql(admin.token, query, variables);
    expect([r.status, r.body.data, r.body.errors?.length]).toEqual([400, undefined, 1]);
  }
  const rows = (await env.audit()).filter((x) => x.operation_name === 'BadVar');
  expect(rows.map((x) => [x.outcome, x.root_fields, x.http_status])).toEqual([['rejected', [], 400], ['rejected', [], 400]]);
});

test('a viewer or operator mutation naming no row is FORBIDDEN too, not a silent null, and audited as the denied mutation it is', async () => {
  for (const role of ['viewer', 'operator'] as const) {
    const who = await env.member(role, `${role}-garbage@staff.example.net`);
    const r = await env.gql(who.token, 'mutation Garbage { updateLocation(input: { id: "garbage", locationPatch: { name: "x" } }) { location { rowId } } }');
    expect([role, r.status, r.body.errors?.[0]?.extensions?.code, r.body.errors?.[0]?.message]).toEqual(
      [role, 200, 'FORBIDDEN', `Permission denied: the ${role} staff role makes no changes (your staff role does not allow this; docs/staff.md)`]);
  }
  const rows = (await env.audit()).filter((x) => x.operation_name === 'Garbage');
  expect(rows.map((x) => [x.role, x.outcome, x.root_fields, x.error_count])).toEqual([['viewer', 'error', ['updateLocation'], 1], ['operator', 'error', ['updateLocation'], 1]]);
});
