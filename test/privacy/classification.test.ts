/**
 * One classification of caller content (docs/privacy.md "Caller content and staff"): the list in
 * the document is compared with the database's grants in both directions, and every listed column
 * is read as a staff viewer through every GraphQL path (the field, each aggregate that offers it, a
 * groupedAggregates key, a relation from the location, `node`), each refused with a permission
 * error and no value. Columns no staff role may read are absent from the schema as each role
 * introspects it (aggregates, group-by, order-by and filters included).
 */
import fs from 'node:fs';
import { startStaffEnv, type Role, type StaffEnv } from '../staff/support.js';

let env: StaffEnv;
const tokens = {} as Record<Role, string>;

/** `app.calls` → [columns], from the table between the caller-content markers of docs/privacy.md. */
function classified(): Map<string, string[]> {
  const doc = fs.readFileSync(new URL('../../docs/privacy.md', import.meta.url), 'utf8');
  const block = /<!-- caller-content:start -->([\s\S]*?)<!-- caller-content:end -->/.exec(doc);
  if (!block) throw new Error('docs/privacy.md has no caller-content list');
  const out = new Map<string, string[]>();
  for (const line of block[1].split('\n')) {
    const m = /^\| `([a-z_]+\.[a-z_]+)` \| (.+) \|$/.exec(line.trim());
    if (m) out.set(m[1], [...m[2].matchAll(/`([a-z_]+)`/g)].map((x) => x[1]));
  }
  return out;
}

const camel = (s: string) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
const pascal = (s: string) => camel(s).replace(/^./, (c) => c.toUpperCase());
const singular = (t: string) => t.replace(/ies$/, 'y').replace(/([^s])s$/, '$1');
const typeOf = (table: string) => pascal(singular(table.split('.')[1]));

beforeAll(async () => {
  env = await startStaffEnv();
  for (const r of ['viewer', 'operator', 'admin'] as Role[]) tokens[r] = (await env.member(r)).token;
}, 60_000);
afterAll(async () => env?.close());

test('the list in docs/privacy.md and the viewer grants agree in both directions', async () => {
  const list = classified();
  expect(list.size).toBeGreaterThanOrEqual(10);
  const { rows } = await env.owner.query<{ tbl: string; col: string; viewer: boolean; operator: boolean }>(
    `select n.nspname || '.' || c.relname as tbl, a.attname as col,
            has_column_privilege('switchboard_staff_viewer', c.oid, a.attname, 'select') as viewer,
            has_column_privilege('switchboard_staff_operator', c.oid, a.attname, 'select') as operator
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
      where n.nspname in ('app', 'billing') and c.relkind in ('r', 'p')`);
  const grants = new Map(rows.map((r) => [`${r.tbl}.${r.col}`, r]));
  for (const [tbl, cols] of list) {
    for (const col of cols) {
      const g = grants.get(`${tbl}.${col}`);
      expect([`${tbl}.${col}`, g !== undefined]).toEqual([`${tbl}.${col}`, true]);
      // Withheld from viewers; operators read caller content.
      expect([`${tbl}.${col}`, g!.viewer, g!.operator]).toEqual([`${tbl}.${col}`, false, true]);
    }
  }
  // Every column an operator reads and a viewer does not is in the list.
  const listed = new Set([...list].flatMap(([t, cols]) => cols.map((c) => `${t}.${c}`)));
  const withheld = rows.filter((r) => r.operator && !r.viewer).map((r) => `${r.tbl}.${r.col}`);
  expect(withheld.filter((c) => !listed.has(c))).toEqual([]);
});

interface Field { name: string; type: { name: string | null; kind: string; ofType: { name: string | null; kind: string; ofType: { name: string | null } | null } | null } }
interface TypeInfo { name: string; kind: string; fields: Field[] | null; inputFields: Field[] | null; enumValues: { name: string }[] | null }

const INTROSPECT = `{ __schema { types { name kind
  fields { name type { name kind ofType { name kind ofType { name } } } }
  inputFields { name type { name kind ofType { name kind ofType { name } } } }
  enumValues { name } } } }`;

async function schemaAs(role: Role): Promise<Map<string, TypeInfo>> {
  const r = await env.gql(tokens[role], INTROSPECT);
  expect(r.body.errors).toBeUndefined();
  return new Map((r.body.data.__schema.types as TypeInfo[]).map((t) => [t.name, t]));
}

const named = (f: Field): string | null => f.type.name ?? f.type.ofType?.name ?? f.type.ofType?.ofType?.name ?? null;

function expectForbidden(path: string, r: { status: number; body: any; text: string }, values: string[]) {
  const codes = (r.body?.errors ?? []).map((e: any) => e.extensions?.code);
  expect([path, codes.includes('FORBIDDEN')]).toEqual([path, true]);
  for (const v of values) expect([path, r.text.includes(v)]).toEqual([path, false]);
}

test('a viewer reading any listed column through any path gets a permission error and no value', async () => {
  const types = await schemaAs('viewer');
  const query = types.get('Query')!;
  const location = types.get('Location')!;
  const secrets = [env.seed.caller.email, env.seed.caller.address, env.seed.caller.transcript];
  // A node id of each kind, as an admin reads it (a kind without rows gets one made from its type name).
  const sample = await env.gql(tokens.admin, '{ allCalls(first: 1) { nodes { id } } }');
  const [, ...callKey] = JSON.parse(Buffer.from(sample.body.data.allCalls.nodes[0].id, 'base64').toString()) as string[];
  let paths = 0;
  for (const [tbl, cols] of classified()) {
    const T = typeOf(tbl);
    const all = query.fields!.find((f) => f.name.startsWith('all') && [`${T}Connection`, `${T}sConnection`, `${T.replace(/y$/, 'ie')}sConnection`].includes(named(f) ?? ''));
    expect([tbl, all?.name]).toEqual([tbl, expect.any(String)]);
    const connection = named(all!)!;
    const relation = location.fields!.find((f) => named(f) === connection);
    const aggregates = types.get(`${T}Aggregates`);
    const groupBy = types.get(`${T}GroupBy`);
    const rows = await env.gql(tokens.admin, `{ ${all!.name}(first: 1) { nodes { id } } }`);
    const nodeId = rows.body.data[all!.name].nodes[0]?.id ?? Buffer.from(JSON.stringify([T, ...callKey])).toString('base64');
    for (const col of cols) {
      const f = camel(col);
      expectForbidden(`${tbl}.${col} field`, await env.gql(tokens.viewer, `{ ${all!.name}(first: 5) { nodes { ${f} } } }`), secrets);
      paths += 1;
      for (const agg of aggregates?.fields ?? []) {
        if (!types.get(named(agg)!)?.fields?.some((x) => x.name === f)) continue;
        expectForbidden(`${tbl}.${col} ${agg.name}`, await env.gql(tokens.viewer, `{ ${all!.name} { aggregates { ${agg.name} { ${f} } } } }`), secrets);
        paths += 1;
      }
      const key = col.toUpperCase();
      if (groupBy?.enumValues?.some((v) => v.name === key)) {
        expectForbidden(`${tbl}.${col} groupedAggregates`, await env.gql(tokens.viewer, `{ ${all!.name} { groupedAggregates(groupBy: [${key}]) { keys } } }`), secrets);
        paths += 1;
      }
      expect([tbl, relation?.name]).toEqual([tbl, expect.any(String)]);
      expectForbidden(`${tbl}.${col} relation`, await env.gql(tokens.viewer, `{ allLocations(first: 2) { nodes { ${relation!.name}(first: 5) { nodes { ${f} } } } } }`), secrets);
      expectForbidden(`${tbl}.${col} node`, await env.gql(tokens.viewer, `query($id: ID!) { node(id: $id) { ... on ${T} { ${f} } } }`, { id: nodeId }), secrets);
      paths += 2;
    }
  }
  // eslint-disable-next-line no-console
  console.log(`caller content as a viewer: ${paths} paths, each refused`);
  // The same columns are read by an operator (the grants withhold them from viewers only).
  const ok = await env.gql(tokens.operator, '{ allCalls(first: 5) { nodes { transcript callSummary metadata issueSummary } } }');
  expect(ok.body.errors).toBeUndefined();
  expect(ok.text).toContain(env.seed.caller.transcript);
}, 120_000);

test('columns no staff role may read are nowhere in the schema, as each role introspects it', async () => {
  const { rows } = await env.owner.query<{ tbl: string; col: string }>(
    `select c.relname as tbl, a.attname as col
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
      where n.nspname in ('app', 'billing', 'staff') and c.relkind in ('r', 'p')
        and exists (select 1 from unnest(array['viewer', 'operator', 'admin']) r
                     where has_any_column_privilege('switchboard_staff_' || r, c.oid, 'select'))
        and not exists (select 1 from unnest(array['viewer', 'operator', 'admin']) r
                         where has_column_privilege('switchboard_staff_' || r, c.oid, a.attname, 'select'))`);
  const hidden = rows.map((r) => `${r.tbl}.${r.col}`);
  // The known secrets are among them (a new secret column joins this list by its grants alone).
  expect(hidden).toEqual(expect.arrayContaining(['api_keys.token_hash', 'webhook_endpoints.secret', 'webhook_endpoints.previous_secret',
    'integrations.access_token', 'integrations.refresh_token', 'members.token_hash']));
  for (const role of ['viewer', 'operator', 'admin'] as Role[]) {
    const types = await schemaAs(role);
    const found: string[] = [];
    for (const { tbl, col } of rows) {
      const f = camel(col);
      const e = col.toUpperCase();
      // Types of that table: its own and every type named after it (aggregates, inputs, enums).
      const prefixes = [typeOf(`x.${tbl}`), `Staff${typeOf(`x.${tbl}`)}`];
      for (const t of types.values()) {
        if (!prefixes.some((p) => t.name.startsWith(p))) continue;
        for (const x of [...(t.fields ?? []), ...(t.inputFields ?? [])]) if (x.name === f) found.push(`${t.name}.${x.name}`);
        for (const v of t.enumValues ?? []) if (v.name === e || v.name.startsWith(`${e}_`)) found.push(`${t.name}.${v.name}`);
      }
    }
    expect([role, found]).toEqual([role, []]);
  }
  // And asking for one is a schema error, not a permission error.
  const r = await env.gql(tokens.admin, '{ allApiKeys { aggregates { distinctCount { tokenHash } } } }');
  expect(r.status).toBe(400);
  expect(r.body.errors[0].message).toMatch(/Cannot query field "tokenHash"/);
}, 60_000);
