/**
 * Documents built to cost far more than their size (docs/staff.md "Timeouts and bounds"): a
 * fragment spread twice at each level (1.5 KB, 2^24 fields once expanded), a document past the
 * parser's token limit (which grafserv parsed again without it, past every bound), and one nested
 * thousands of levels (the recursive parser's stack). Each is refused at once with a 400 naming a
 * bound; nothing in it runs, and the audit says so.
 */
import { startStaffEnv, type StaffEnv } from './support.js';

let env: StaffEnv;
let admin: { id: string; token: string };
beforeAll(async () => {
  // Room for a document of 20,000 short tokens; the other bounds at their defaults.
  env = await startStaffEnv({ limits: { maxDocumentBytes: 400_000 } });
  admin = await env.member('admin');
}, 60_000);
afterAll(async () => env?.close());

const bound = (name: string, message: RegExp) => [expect.objectContaining({ message: expect.stringMatching(message), extensions: expect.objectContaining({ code: 'BOUND_EXCEEDED', bound: name }) })];

test('a fragment spread twice at each of 26 levels is refused at once, as any viewer may send it, and audited with its name', async () => {
  const viewer = await env.member('viewer');
  const levels = 26;
  const fragments = Array.from({ length: levels }, (_, i) =>
    `fragment C${i} on CallConnection { totalCount${i + 1 < levels ? ` ...C${i + 1} ...C${i + 1}` : ''} }`).join('\n');
  const bomb = `query Bomb { allCalls(first: 1) { ...C0 } }\n${fragments}`;
  expect(bomb.length).toBeLessThan(2_000);
  // Walked at every spread, this took minutes of the staff process's only thread (4 s at 24 levels).
  const r = await env.gql(viewer.token, bomb);
  expect([r.status, r.body.errors]).toEqual([400, bound('cost', /^Document has more than 10000 fields with each fragment counted where it is spread \(STAFF_MAX_COST\)$/)]);
  // A fragment spread twice is a document like any other.
  const twice = 'query Twice { allCalls(first: 1) { ...C ...C } } fragment C on CallConnection { totalCount }';
  expect((await env.gql(viewer.token, twice)).body).toEqual({ data: { allCalls: { totalCount: expect.any(Number) } } });
  const rows = await env.audit();
  expect(rows.find((x) => x.operation_name === 'Bomb')).toMatchObject({ operation_type: 'query', outcome: 'rejected', root_fields: [], http_status: 400 });
});

test('a document past 20,000 tokens is refused, not parsed again without the limit: a two-change mutation behind a filler does not run', async () => {
  const nameOf = async () => (await env.owner.query('select name from app.locations where id = $1', [env.seed.locations.b])).rows[0].name as string;
  const before = await nameOf();
  const change = (alias: string, name: string) => `${alias}: updateLocationByRowId(input: { rowId: "${env.seed.locations.b}", locationPatch: { name: "${name}" } }) { location { rowId } }`;
  const doc = `mutation Two { ${change('x', 'first')} ${change('y', 'second')} }\nquery Filler { ${'__typename '.repeat(20_000)} }`;
  const r = await env.gql(admin.token, doc);
  expect([r.status, r.body.errors]).toEqual([400, bound('document_tokens', /^Document has more than 20000 tokens/)]);
  expect(await nameOf()).toBe(before);
  // Sent with operationName Two, as a client would to pick it.
  const res = await fetch(`${env.staff.url}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.token}` },
    body: JSON.stringify({ query: doc, operationName: 'Two' }),
  });
  expect(res.status).toBe(400);
  expect(await nameOf()).toBe(before);
});

test('a document nested thousands of levels is refused before it is parsed, naming the depth bound', async () => {
  for (const doc of [
    `{ allCalls(first: ${'['.repeat(3000)}1${']'.repeat(3000)}) { totalCount } }`,
    `${'{ allCalls { nodes { locationByLocationId '.repeat(1200)}${'} } }'.repeat(1200)}`,
  ]) {
    const r = await env.gql(admin.token, doc);
    expect([r.status, r.body.errors]).toEqual([400, bound('depth', /^Document nests \d+ levels of braces, brackets or parentheses, more than 64 \(STAFF_MAX_DEPTH\)$/)]);
  }
  // Braces inside strings, block strings and comments are not nesting.
  const quoted = `# ${'{'.repeat(100)}\n{ allCalls(first: 1, condition: { outcome: "${'{'.repeat(100)}" }) { totalCount } }`;
  expect((await env.gql(admin.token, quoted)).body).toEqual({ data: { allCalls: { totalCount: 0 } } });
});
