/**
 * A value the database cannot read (a Datetime that is no date) is the client's error, said
 * without the value. An error staff should not read as it is (docs/staff.md, "Errors") is answered with a reference
 * id, and the service log gets that id with the error's kind and SQLSTATE: never its message, the
 * document or a variable, which can hold caller data. grafserv's own mask printed all three (with
 * the stack) to the process output.
 */
import { jest } from '@jest/globals';
import { memoryLog } from '../support/harness.js';
import { startStaffEnv, type StaffEnv } from './support.js';

const mem = memoryLog('info');
let env: StaffEnv;
beforeAll(async () => {
  env = await startStaffEnv({ log: mem.log });
}, 60_000);
afterAll(async () => env?.close());

test('a masked error leaves a reference in the answer and its kind in the log, no caller data anywhere in the output', async () => {
  const operator = await env.member('operator');
  const printed: string[] = [];
  const spies = (['error', 'warn', 'log'] as const).map((k) =>
    jest.spyOn(console, k).mockImplementation((...args: unknown[]) => void printed.push(args.map(String).join(' '))));
  // An error of ours, not the client's: a column the built schema reads is gone (42703). The
  // schema is built on the first request, so one comes first.
  expect((await env.gql(operator.token, '{ __typename }')).body.data).toEqual({ __typename: 'Query' });
  await env.owner.query('alter table app.customers rename column call_count to call_count_renamed');
  try {
    const phone = '+13125550166';
    const r = await env.gql(operator.token, 'query($p: E164) { allCustomers(first: 1, condition: { phone: $p }) { nodes { callCount } } }', { p: phone });
    const [err] = r.body.errors;
    expect(err.extensions).toEqual({ code: 'INTERNAL_ERROR', error_id: expect.stringMatching(/^[0-9a-f]{12}$/) });
    expect(err.message).toContain(err.extensions.error_id);
    const inline = await env.gql(operator.token, `{ allCustomers(condition: { phone: "${phone}" }, first: -1) { totalCount } }`);
    expect(inline.body.errors?.length ?? 0).toBeGreaterThan(0);

    const logged = mem.records().filter((x) => x.msg === 'staff GraphQL error masked');
    expect(logged.map((x) => x.error_id)).toContain(err.extensions.error_id);
    expect(logged[0]).toMatchObject({ kind: expect.any(String), sqlstate: expect.stringMatching(/^[0-9A-Z]{5}$/) });
    const output = [...mem.lines, ...printed].join('\n');
    // Field names in a path are the schema's; the document's text and its values are not there.
    for (const v of [phone, phone.slice(2), 'condition:', 'first: -1', '$p']) expect(output).not.toContain(v);
  } finally {
    await env.owner.query('alter table app.customers rename column call_count_renamed to call_count');
    for (const s of spies) s.mockRestore();
  }
});

test("a value the database cannot read is the client's error, INVALID_VALUE, said without the value", async () => {
  const operator = await env.member('operator');
  const phone = '+13125550177';
  const before = mem.records().filter((x) => x.msg === 'staff GraphQL error masked').length;
  const query = 'query($d: Datetime) { allCalls(first: 1, condition: { startedAt: $d }) { totalCount } }';
  const r = await env.gql(operator.token, query, { d: phone });
  // PostgreSQL reads "+1312…" as a time zone offset out of range (22009).
  expect(r.body.errors).toEqual([expect.objectContaining({
    message: expect.stringMatching(/^A value in the request is not valid: [^"]+ \(SQLSTATE 22\d{3}\)$/),
    extensions: { code: 'INVALID_VALUE' },
  })]);
  expect(r.text).not.toContain(phone.slice(2));
  const words = await env.gql(operator.token, query, { d: 'Pat Caller' });
  expect(words.body.errors).toEqual([expect.objectContaining({
    message: 'A value in the request is not valid: invalid input syntax for type timestamp with time zone (SQLSTATE 22007)',
    extensions: { code: 'INVALID_VALUE' },
  })]);
  // A value holding a line break or quotes: the message is cut at the first quote all the same.
  for (const d of [`${phone}\nx`, '"12 Elm Street"', 'Pat "Caller" x']) {
    const odd = await env.gql(operator.token, query, { d });
    expect([d, odd.body.errors?.[0]?.message]).toEqual([d, expect.stringMatching(/^A value in the request is not valid: [^"\n]+ \(SQLSTATE 22\d{3}\)$/)]);
    for (const part of ['5550177', 'Elm', 'Caller']) expect(odd.text).not.toContain(part);
  }
  // Nothing masked, so nothing for the log to hold.
  expect(mem.records().filter((x) => x.msg === 'staff GraphQL error masked')).toHaveLength(before);
  expect(mem.lines.join('\n')).not.toContain(phone.slice(2));
});

test('client mistakes grafast and @dataplan/pg raise as plain errors are said plainly: a subscription (400 NOT_SUPPORTED), a delete of no row (NOT_FOUND)', async () => {
  const admin = await env.member('admin', 'plain@staff.example.net');
  const sub = await env.gql(admin.token, 'subscription Watch { __typename }');
  expect([sub.status, sub.body.errors]).toEqual([400, [expect.objectContaining({ message: expect.stringMatching(/^The staff GraphQL has no subscriptions/), extensions: { code: 'NOT_SUPPORTED' } })]]);
  const none = '00000000-0000-0000-0000-000000000000';
  const del = await env.gql(admin.token, `mutation { deleteLocationByRowId(input: { rowId: "${none}" }) { deletedLocationId } }`);
  expect(del.body.errors).toEqual([expect.objectContaining({ message: 'No row matched: nothing was deleted', extensions: { code: 'NOT_FOUND' } })]);
  const rows = (await env.audit()).filter((x) => x.member_id === admin.id);
  expect(rows.map((x) => [x.operation_name, x.outcome])).toEqual([['Watch', 'rejected'], [null, 'error']]);
});

test('an update or delete that names no row is NOT_FOUND, whatever names it: a key of no row, a node id of another table, one that decodes to nothing; nothing changes', async () => {
  const admin = await env.member('admin', 'rows@staff.example.net');
  const locations = async () => (await env.owner.query('select id, name from app.locations order by id')).rows;
  const before = await locations();
  const ids = (await env.gql(admin.token, '{ allLocations(first: 1) { nodes { id rowId name } } allCalls(first: 1) { nodes { id } } }')).body.data;
  const [location] = ids.allLocations.nodes;
  const callId = ids.allCalls.nodes[0].id;
  const none = '00000000-0000-0000-0000-000000000000';
  const refused = [
    ['updated', `mutation { updateLocationByRowId(input: { rowId: "${none}", locationPatch: { name: "x" }, clientMutationId: "u1" }) { clientMutationId location { name } } }`],
    ['updated', `mutation { updateLocationByRowId(input: { rowId: "${none}", locationPatch: { name: "x" } }) { clientMutationId } }`],
    ['updated', `mutation { updateLocation(input: { id: "${callId}", locationPatch: { name: "x" } }) { location { name } } }`],
    ['updated', 'mutation { updateLocation(input: { id: "not a node id", locationPatch: { name: "x" } }) { clientMutationId } }'],
    ['deleted', `mutation { deleteLocation(input: { id: "${callId}" }) { deletedLocationId } }`],
    ['deleted', 'mutation { deleteLocation(input: { id: "bm90IG91cnM=" }) { clientMutationId } }'],
    ['deleted', `mutation { deleteLocationByRowId(input: { rowId: "${none}" }) { clientMutationId } }`],
  ] as const;
  for (const [verb, query] of refused) {
    const r = await env.gql(admin.token, query);
    const field = Object.keys(r.body.data ?? {})[0];
    expect([query, r.body.data?.[field], r.body.errors]).toEqual([query, null, [expect.objectContaining({
      message: `No row matched: nothing was ${verb}`, extensions: { code: 'NOT_FOUND' }, path: [field],
    })]]);
  }
  expect(await locations()).toEqual(before);
  // The allowed side: the same mutations naming a row change it and answer their payload.
  const renamed = await env.gql(admin.token, `mutation { updateLocation(input: { id: "${location.id}", locationPatch: { name: "by-node-id" }, clientMutationId: "u2" }) { clientMutationId location { name } } }`);
  expect(renamed.body).toEqual({ data: { updateLocation: { clientMutationId: 'u2', location: { name: 'by-node-id' } } } });
  const back = await env.gql(admin.token, `mutation { updateLocationByRowId(input: { rowId: "${location.rowId}", locationPatch: { name: "${location.name}" } }) { location { name } } }`);
  expect(back.body).toEqual({ data: { updateLocationByRowId: { location: { name: location.name } } } });
  expect(await locations()).toEqual(before);
});

test("grafast's and @dataplan/pg's own refusals of a request carry INVALID_VALUE: a cursor not of ours, a patch that sets nothing", async () => {
  const operator = await env.member('operator', 'cursor@staff.example.net');
  const admin = await env.member('admin', 'patch@staff.example.net');
  for (const cursor of ['garbage', Buffer.from('["other", 1]').toString('base64')]) {
    const r = await env.gql(operator.token, 'query($c: Cursor) { allCalls(first: 1, after: $c) { totalCount } }', { c: cursor });
    expect([cursor, r.body.errors]).toEqual([cursor, [expect.objectContaining({ message: expect.stringMatching(/cursor/), extensions: { code: 'INVALID_VALUE' } })]]);
  }
  const none = '00000000-0000-0000-0000-000000000000';
  const empty = await env.gql(admin.token, `mutation { updateLocationByRowId(input: { rowId: "${none}", locationPatch: {} }) { clientMutationId } }`);
  expect(empty.body.errors).toEqual([expect.objectContaining({ message: 'Attempted to update a record, but no new values were specified.', extensions: { code: 'INVALID_VALUE' } })]);
});
