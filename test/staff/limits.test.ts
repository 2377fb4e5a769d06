/**
 * Protection of the database and the process (docs/staff.md "Timeouts and bounds"): a document
 * past the depth, cost, alias, rows or size bound is refused with HTTP 400 and a GraphQL error
 * naming the bound before anything runs; a connection without first/last gets STAFF_MAX_ROWS; an
 * answer past the groups or bytes bound is replaced by a 400 naming it; every staff statement runs
 * under the staff statement_timeout; and binding the admin listener beyond loopback warns.
 */
import { pino } from 'pino';
import { startStaffGraphql } from '../../src/admin/graphql.js';
import { testLog } from '../support/harness.js';
import { gqlAt, startStaffEnv, UNPACED, type StaffEnv } from './support.js';

let env: StaffEnv;
let admin: { id: string; token: string };
beforeAll(async () => {
  env = await startStaffEnv({ limits: { maxDepth: 6, maxCost: 300, statementTimeoutMs: 300, maxAliases: 5, maxRows: 1, maxGroups: 1, maxAnswerBytes: 4000, maxDocumentBytes: 3000 } });
  admin = await env.member('admin');
}, 60_000);
afterAll(async () => env?.close());

test('a document deeper than the bound is refused with a clear error, and one within it runs', async () => {
  const ok = await env.gql(admin.token, '{ allCalls { nodes { locationByLocationId { callsByLocationId { totalCount } } } } }');
  expect(ok.body.errors).toBeUndefined();
  const deep = await env.gql(admin.token, '{ allCalls { nodes { locationByLocationId { callsByLocationId { nodes { locationByLocationId { callsByLocationId { nodes { rowId } } } } } } } } }');
  expect(deep.status).toBe(400);
  expect(deep.body.data).toBeUndefined();
  expect(deep.body.errors).toEqual([expect.objectContaining({
    message: expect.stringMatching(/^Query depth limit of 6 exceeded, found \d+ \(STAFF_MAX_DEPTH\)$/), extensions: expect.objectContaining({ code: 'BOUND_EXCEEDED', bound: 'depth' }) })]);
});

test('a document costlier than the bound is refused with a clear error', async () => {
  const wide = `{ allCalls { totalCount nodes { ${'rowId outcome durationSec '.repeat(60)} } } }`;
  const r = await env.gql(admin.token, wide);
  expect(r.status).toBe(400);
  expect(r.body.data).toBeUndefined();
  expect(r.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/^Query Cost limit of 300 exceeded, found [\d.]+ \(STAFF_MAX_COST; counted as it runs, with first: 1 \(STAFF_MAX_ROWS\) on each connection listing rows without first or last: ask for fewer rows\)$/) })]);
  await env.staff.flushAudit();
  const rows = await env.audit();
  expect(rows.at(-1)).toMatchObject({ outcome: 'rejected', root_fields: [], http_status: 400 });
});

const timezoneOf = async (id: string) => (await env.owner.query('select timezone from app.locations where id = $1', [id])).rows[0].timezone as string;

test('more aliases than the bound: 400 naming it, and the mutations in it do not run', async () => {
  const before = await timezoneOf(env.seed.locations.b);
  const six = Array.from({ length: 6 }, (_, i) =>
    `m${i}: updateLocationByRowId(input: { rowId: "${env.seed.locations.b}", locationPatch: { timezone: "America/Denver" } }) { location { rowId } }`).join(' ');
  const r = await env.gql(admin.token, `mutation Many { ${six} }`);
  expect(r.status).toBe(400);
  expect(r.body.errors).toEqual([expect.objectContaining({ message: 'Document has 6 aliases, more than the limit of 5 (STAFF_MAX_ALIASES)' })]);
  expect(await timezoneOf(env.seed.locations.b)).toBe(before);
  const rows = await env.audit();
  expect(rows.at(-1)).toMatchObject({ operation_name: 'Many', operation_type: 'mutation', outcome: 'rejected', root_fields: [], http_status: 400 });
});

test('a mutation document with two changes is refused before either runs: each would commit on its own', async () => {
  const before = await timezoneOf(env.seed.locations.b);
  const change = (tz: string) => `updateLocationByRowId(input: { rowId: "${env.seed.locations.b}", locationPatch: { timezone: "${tz}" } }) { location { rowId } }`;
  const r = await env.gql(admin.token, `mutation Two { a: ${change('America/Denver')} ...More } fragment More on Mutation { b: ${change('Not/AZone')} }`);
  expect(r.status).toBe(400);
  expect(r.body.errors).toEqual([expect.objectContaining({
    message: expect.stringMatching(/^A mutation document may make one change; this one has 2 top-level fields/),
    extensions: expect.objectContaining({ code: 'BOUND_EXCEEDED', bound: 'mutation_fields' }) })]);
  expect(await timezoneOf(env.seed.locations.b)).toBe(before);
  const one = await env.gql(admin.token, `mutation One { ${change('America/Denver')} }`);
  expect(one.body.errors).toBeUndefined();
  expect(await timezoneOf(env.seed.locations.b)).toBe('America/Denver');
});

test('a nested grouping is bounded per parent: each location\'s groups are answered in full while each is within the bound', async () => {
  const nested = await startStaffEnv({ limits: { maxGroups: 2, maxRows: 2 } });
  try {
    const { locations: { a, b } } = nested.seed;
    await nested.owner.query(`insert into app.calls (location_id, platform_call_id, outcome, started_at, duration_sec)
      select l, 'nested-' || l::text || g, (array['booked', 'lead'])[g % 2 + 1], now(), 30 from unnest($1::uuid[]) l, generate_series(1, 6) g`, [[a, b]]);
    const who = await nested.member('admin', 'nested-admin@staff.example.net');
    // Four groups in all, two a location: a LIMIT over the whole query (3) would drop one.
    const r = await nested.gql(who.token, '{ allLocations(first: 2) { nodes { callsByLocationId { groupedAggregates(groupBy: [OUTCOME]) { keys } } } } }');
    const keys = (r.body.data.allLocations.nodes as { callsByLocationId: { groupedAggregates: { keys: string[] }[] } }[])
      .map((n) => n.callsByLocationId.groupedAggregates.map((g) => g.keys[0]).sort());
    expect(keys).toEqual([['booked', 'lead'], ['booked', 'lead']]);
  } finally {
    await nested.close();
  }
});

test('STAFF_MAX_DOCUMENT_BYTES above 100,000 is the bound that decides, not the HTTP layer\'s own limit', async () => {
  const big = await startStaffEnv({ limits: { maxDocumentBytes: 150_000 } });
  try {
    const who = await big.member('admin', 'big-admin@staff.example.net');
    const padded = (bytes: number) => `{ allLocations { totalCount } } ${'#'.repeat(bytes - 40)}\n`;
    const within = await big.gql(who.token, padded(120_000));
    expect([within.status, within.body.errors]).toEqual([200, undefined]);
    const past = await big.gql(who.token, padded(160_000));
    expect(past.status).toBe(400);
    expect(past.body.errors).toEqual([expect.objectContaining({
      message: expect.stringMatching(/^Document of \d+ bytes exceeds the limit of 150000 bytes \(STAFF_MAX_DOCUMENT_BYTES\)$/),
      extensions: expect.objectContaining({ code: 'BOUND_EXCEEDED', bound: 'document_bytes' }) })]);
  } finally {
    await big.close();
  }
});

test('rows per connection: first/last past the bound is refused, inline or in a variable; without them the bound applies', async () => {
  const inline = await env.gql(admin.token, '{ allCalls(first: 5000) { nodes { rowId } } }');
  expect(inline.status).toBe(400);
  expect(inline.body.errors[0].message).toBe('allCalls(first:) asks for more than 1 rows, or for all of them (STAFF_MAX_ROWS)');
  const viaVariable = await env.gql(admin.token, 'query($n: Int) { allCalls(last: $n) { nodes { rowId } } }', { n: 2 });
  expect(viaVariable.status).toBe(400);
  expect(viaVariable.body.errors[0].message).toMatch(/^allCalls\(last:\) .*STAFF_MAX_ROWS/);
  const withinVariable = await env.gql(admin.token, 'query($n: Int) { allCalls(last: $n) { nodes { rowId } } }', { n: 1 });
  expect(withinVariable.status).toBe(200);
  expect(withinVariable.body.data.allCalls.nodes).toHaveLength(1);
  const nullFirst = await env.gql(admin.token, 'query($n: Int) { allCalls(first: $n) { nodes { rowId } } }', { n: null });
  expect(nullFirst.status).toBe(400);
  // A variable's default counts as if sent; an optional one not sent is no page size.
  const byDefault = await env.gql(admin.token, 'query($n: Int = 2) { allCalls(first: $n) { nodes { rowId } } }', {});
  expect(byDefault.body.errors[0].message).toMatch(/^allCalls\(first:\) .*STAFF_MAX_ROWS/);
  expect((await env.gql(admin.token, 'query($n: Int) { allCalls(first: $n) { nodes { rowId } } }', {})).status).toBe(400);
  // A value of the wrong type, or a required variable not sent, is GraphQL's to refuse, not a request for too many rows.
  for (const [query, variables] of [['query($n: Int) { allCalls(first: $n) { nodes { rowId } } }', { n: '1' }], ['query($n: Int!) { allCalls(first: $n) { nodes { rowId } } }', {}]] as const) {
    const r = await env.gql(admin.token, query, variables);
    expect([r.status, r.body.errors?.[0]?.message]).toEqual([400, expect.stringMatching(/^Variable "\$n"/)]);
  }
  // No first/last: the first STAFF_MAX_ROWS rows, and hasNextPage says there are more.
  const capped = await env.gql(admin.token, '{ allCalls { totalCount pageInfo { hasNextPage } nodes { rowId } } }');
  expect(capped.status).toBe(200);
  expect(capped.body.data.allCalls).toMatchObject({ totalCount: 2, pageInfo: { hasNextPage: true } });
  expect(capped.body.data.allCalls.nodes).toHaveLength(1);
  // A count alone lists no rows and needs no bound.
  expect((await env.gql(admin.token, '{ allCalls { totalCount } }')).body).toEqual({ data: { allCalls: { totalCount: 2 } } });
});

test('the page size is written into the client\'s own text: errors point at the lines and columns the client sent', async () => {
  const viewer = await env.member('viewer', 'lines-viewer@staff.example.net');
  // allCalls on line 4, column 5; transcript is withheld from viewers.
  const r = await env.gql(viewer.token, '# a comment\nquery Lines {\n\n    allCalls { nodes { rowId transcript } }\n}');
  expect(r.body.errors?.[0]).toMatchObject({ extensions: { code: 'FORBIDDEN' }, locations: [{ line: 4, column: 5 }] });
  // Arguments kept where they are: the page size goes after the last of them.
  const ok = await env.gql(admin.token, '{ allCalls(orderBy: [STARTED_AT_DESC]) { nodes { rowId } } }');
  expect([ok.body.errors, ok.body.data.allCalls.nodes.length]).toEqual([undefined, 1]);
});

test('rows listed through an inline or named fragment get the default page too', async () => {
  for (const q of [
    '{ allCalls { pageInfo { hasNextPage } ... on CallConnection { nodes { rowId } } } }',
    '{ allCalls { ...Rows } } fragment Rows on CallConnection { pageInfo { hasNextPage } edges { node { rowId } } }',
  ]) {
    const r = await env.gql(admin.token, q);
    expect([r.status, r.body.errors]).toEqual([200, undefined]);
    expect(r.body.data.allCalls.pageInfo).toEqual({ hasNextPage: true });
    expect(r.body.data.allCalls.nodes ?? r.body.data.allCalls.edges).toHaveLength(1);
  }
});

test('the cost counts a connection as it runs: without first, or with first in a variable, as with it inline', async () => {
  const defaults = await startStaffGraphql(env.db.url, '127.0.0.1', 0, { log: testLog, limits: UNPACED });
  try {
    const nested = (first: string) => `{ allLocations${first} { nodes { callsByLocationId${first} { nodes { rowId } } } } }`;
    for (const q of [nested('(first: 1000)'), nested(''), `query($n: Int) ${nested('(first: $n)')}`]) {
      const r = await gqlAt(defaults.url, admin.token, q, q.includes('$n') ? { n: 1000 } : undefined);
      expect([q, r.status]).toEqual([q, 400]);
      expect(r.body.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/^Query Cost limit of 50000 exceeded, found \d+ \(STAFF_MAX_COST/),
        extensions: expect.objectContaining({ bound: 'cost' }) })]);
    }
    // A single page of the default size stays within the default cost.
    const page = await gqlAt(defaults.url, admin.token, '{ allCalls { nodes { rowId locationId outcome durationSec startedAt } } }');
    expect([page.status, page.body.data?.allCalls.nodes.length]).toEqual([200, 2]);
  } finally {
    await defaults.close();
  }
});

test('a document larger than the bound is refused before it is parsed', async () => {
  const big = `{ allLocations { totalCount } }\n# ${'x'.repeat(3000)}`;
  const r = await env.gql(admin.token, big);
  expect(r.status).toBe(400);
  expect(r.body.errors[0].message).toMatch(/^Document of \d+ bytes exceeds the limit of 3000 bytes \(STAFF_MAX_DOCUMENT_BYTES\)$/);
});

test('an answer past the groups or bytes bound is replaced by a 400 naming the bound', async () => {
  const groups = await env.gql(admin.token, '{ allCalls { groupedAggregates(groupBy: [LOCATION_ID]) { keys } } }');
  expect(groups.status).toBe(400);
  expect(groups.body.data).toBeUndefined();
  expect(groups.body.errors[0].message).toMatch(/more than the limit of 1 \(STAFF_MAX_GROUPS\)/);
  // One group a row: the grouped query itself stops one group past the bound (LIMIT 2 here), so
  // the staff process never holds more, however many rows there are.
  await env.owner.query(`insert into app.calls (location_id, platform_call_id, outcome, started_at, duration_sec)
    select $1, 'groups-' || g, 'booked', now(), 30 from generate_series(1, 8) g`, [env.seed.locations.b]);
  const perRow = await env.gql(admin.token, '{ allCalls { groupedAggregates(groupBy: [ROW_ID]) { keys } } }');
  expect([perRow.status, perRow.body.errors[0].message]).toEqual([400, expect.stringMatching(/^The answer has a list of more than 1 entries \(groupedAggregates groups\), more than the limit of 1/)]);
  // A grouping within the bound is answered in full.
  const one = await env.gql(admin.token, `{ allCalls(condition: { locationId: "${env.seed.locations.a}" }) { groupedAggregates(groupBy: [LOCATION_ID]) { keys } } }`);
  expect(one.body).toEqual({ data: { allCalls: { groupedAggregates: [{ keys: [env.seed.locations.a] }] } } });
  await env.owner.query(`delete from app.calls where platform_call_id like 'groups-%'`);
  await env.owner.query('update app.calls set transcript = $2 where id = $1', [env.seed.callA, `Agent: Hello. ${'Caller: my furnace is out. '.repeat(200)}`]);
  const bytes = await env.gql(admin.token, `{ allCalls(condition: { locationId: "${env.seed.locations.a}" }) { nodes { transcript } } }`);
  expect(bytes.status).toBe(400);
  expect(bytes.body.data).toBeUndefined();
  expect(bytes.body.errors[0].message).toMatch(/limit of 4000 bytes \(STAFF_MAX_ANSWER_BYTES\)/);
  expect(bytes.text).not.toContain('furnace');
  const rows = await env.audit();
  expect(rows.at(-1)).toMatchObject({ outcome: 'error', root_fields: ['allCalls'], http_status: 400, error_count: 1 });
  // Ruru's introspection (no aliases) is the schema's size and is not bounded by it.
  const intro = await env.gql(admin.token, '{ __schema { types { name fields { name } } } }');
  expect(intro.status).toBe(200);
  expect(intro.text.length).toBeGreaterThan(4000);
  const aliased = await env.gql(admin.token, '{ a: __schema { types { name fields { name } } } }');
  expect(aliased.status).toBe(400);
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

test('the staff statement timeout bounds staff queries, not the schema build: a timeout shorter than the introspection still serves', async () => {
  // On the connection, 1 ms would cancel PostGraphile's catalogue introspection and leave every
  // request unanswerable ("Unknown error occurred"); per request it cancels only the staff query.
  const short = await startStaffGraphql(env.db.url, '127.0.0.1', 0, { log: testLog, limits: { ...UNPACED, statementTimeoutMs: 1 } });
  try {
    const r = await gqlAt(short.url, admin.token, '{ __typename }');
    expect(r.body).toEqual({ data: { __typename: 'Query' } });
  } finally {
    await short.close();
  }
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
