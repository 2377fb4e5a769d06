/**
 * A client's mistake is a 4xx in the envelope and changes nothing, on every operation the document
 * publishes: each documented query parameter given values of the wrong kind, each path parameter
 * replaced by something that is not the record, and each body property of a write replaced by a
 * value of the wrong type or size, one at a time. No answer may be a 5xx; every answer must conform
 * to the document (test/support/contract.ts, through `request`); and a write answered 4xx must
 * leave the location's records exactly as they were.
 *
 * Operations are read from the served document, so routes added later are covered too
 * (test/rest/schema-fuzz sends the valid bodies; this file the invalid inputs).
 */
import { startApiWorld, tokenOperations, type ApiWorld, type Json } from '../support/api-world.js';
import { request } from '../support/harness.js';

/** Query values of the wrong kind, size or shape, sent as the raw query string's value. */
const QUERY_VALUES = ['', 'x', '-1', '1e309', '99999999999999999999', '%00', '%C3%28', '2026-02-30', '9'.repeat(3000), 'a%2Cb'];
/** Path segments that are not the record: malformed, a NUL, another id's shape, nobody's uuid. */
const PATH_VALUES = ['x', '%00', '1'.repeat(300), '00000000-0000-0000-0000-000000000000', 'E0AEEAD0-0000-4000-8000-000000000000', '%E2%80%AE'];
/** Body property values of the wrong type or beyond every limit. */
const BODY_VALUES: unknown[] = [null, -1, 1e308, true, '', '\u0000', '\ud800', 'é'.repeat(5000), [null], { a: 1 }, '2026-02-30', '9'.repeat(400)];
/** Whole bodies of the wrong shape. */
const WHOLE_BODIES: unknown[] = [[], 'text', 0, null, {}, { unknown_field: 1 }];

let w: ApiWorld;
let fingerprintSql: string;

beforeAll(async () => {
  w = await startApiWorld();
  // Every app table with a location_id: how many rows of this location it holds, and the sum of
  // their xmin (an insert, update or delete of one of them changes one or the other).
  const { rows } = await w.t.owner.query(
    `select table_name from information_schema.columns where table_schema = 'app' and column_name = 'location_id'
      and table_name in (select table_name from information_schema.tables where table_schema = 'app' and table_type = 'BASE TABLE')
      order by table_name`);
  fingerprintSql = `select concat_ws('|', ${rows.map((r) =>
    `(select count(*) || ':' || coalesce(sum(x.xmin::text::bigint), 0) from app.${r.table_name} x where x.location_id = $1)`).join(', ')}) as d`;
}, 60_000);
afterAll(() => w.close());

const fingerprint = async () => (await w.t.owner.query(fingerprintSql, [w.loc.id])).rows[0].d as string;

interface Probe {
  label: string;
  method: string;
  url: string;
  body?: unknown;
}

function probesOf(method: string, template: string, op: Json): Probe[] {
  const M = method.toUpperCase();
  const base = `/api/v1${w.concretePath(template)}`;
  const out: Probe[] = [];
  for (const p of (op.parameters ?? []) as Json[]) {
    if (p.in !== 'query') continue;
    for (const v of QUERY_VALUES) out.push({ label: `?${p.name}=${v.slice(0, 20)}`, method: M, url: `${base}?${p.name}=${v}` });
    out.push({ label: `?${p.name} twice`, method: M, url: `${base}?${p.name}=1&${p.name}=2` });
  }
  for (const m of template.matchAll(/\{([A-Za-z0-9_]+)\}/g)) {
    for (const v of PATH_VALUES) {
      const path = template.replace(m[0], v);
      out.push({ label: `{${m[1]}}=${v.slice(0, 20)}`, method: M, url: `/api/v1${w.concretePath(path)}` });
    }
  }
  const schema: Json | undefined = op.requestBody?.content?.['application/json']?.schema;
  if (schema) {
    for (const body of WHOLE_BODIES) out.push({ label: `body ${JSON.stringify(body)}`, method: M, url: base, body });
    const props = Object.keys(schema.properties ?? schema.items?.properties ?? {});
    for (const k of props) {
      for (const v of BODY_VALUES) {
        const one = { [k]: v };
        // A put of a list takes an array of items: the wrong item inside it.
        out.push({ label: `${k}=${JSON.stringify(v)?.slice(0, 20)}`, method: M, url: base, body: schema.type === 'array' ? [one] : one });
      }
    }
  }
  return out;
}

test('wrong query values, path parameters and body properties are a 4xx on every operation, and a refused write changes nothing', async () => {
  const ops = tokenOperations(w.doc, ['get', 'post', 'put', 'patch', 'delete']);
  expect(ops.length).toBeGreaterThanOrEqual(40);
  const failures: string[] = [];
  let sent = 0;
  let refusedWrites = 0;
  const statuses: Record<number, number> = {};
  for (const { method, path, op } of ops) {
    const writes = method !== 'get';
    for (const probe of probesOf(method, path, op)) {
      const before = writes ? await fingerprint() : '';
      let status: number;
      let body: any;
      try {
        ({ status, body } = await request(w.t.baseUrl, probe.method, probe.url, { token: w.token, body: probe.body }));
      } catch (err) {
        // `request` throws when an answer does not conform to the document.
        failures.push(`${probe.method} ${path} ${probe.label} → ${(err as Error).message.split('\n')[0]}`);
        continue;
      }
      sent += 1;
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status >= 500) failures.push(`${probe.method} ${path} ${probe.label} → ${status} ${JSON.stringify(body)}`);
      else if (status >= 400) {
        if (typeof body?.error?.code !== 'string' || typeof body?.error?.message !== 'string') {
          failures.push(`${probe.method} ${path} ${probe.label} → ${status} without the error envelope`);
        }
        if (writes) {
          refusedWrites += 1;
          if ((await fingerprint()) !== before) failures.push(`${probe.method} ${path} ${probe.label} → ${status}, and the location's records changed`);
        }
      }
    }
  }
  if (process.env.NEGATIVE_FUZZ_SUMMARY) console.log({ sent, refusedWrites, statuses });
  expect(failures).toEqual([]);
  // The walk reached the operations: thousands of probes, most writes among them refused.
  expect(sent).toBeGreaterThan(2000);
  expect(refusedWrites).toBeGreaterThan(500);
}, 600_000);
