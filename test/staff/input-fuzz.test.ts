/**
 * A wrong input is the client's mistake, said as such, and changes nothing (docs/staff.md,
 * "Decisions": "Permission, timeout and constraint errors are shown as they are"), on the staff
 * GraphQL as test/rest/negative-fuzz.test.ts checks it on the REST API. Built from the schema introspected at
 * test time, so fields added later are covered too: every root query field that takes arguments
 * (as an operator and as a viewer) and every mutation (as an admin, who may write) is sent with ONE
 * argument or input-object field at a time replaced by a wrong value (null, -1, 1e308, a huge
 * integer, '', a NUL, a lone surrogate, 5,000 characters, [null], {}, impossible and out-of-range
 * dates, malformed and nobody's ids, an enum value that does not exist, a garbage cursor, JSON
 * nested 10,000 deep), through a variable of the type the schema gives it, or inline.
 *
 * For every probe: no 5xx; no INTERNAL_ERROR (the masked "our fault" code: src/staff/plugin.ts
 * `staffMaskError`); nothing of the seed's caller in a viewer's answer; and a mutation answered
 * with errors leaves every table as it was. It found two masked client mistakes: a value too long
 * for its column's index (SQLSTATE 54000) and a JSON variable nested thousands deep (a RangeError
 * in @dataplan/pg's JSON.stringify). Values are rotated over the fields rather than all sent to
 * each, to keep the file near 30 s on two cores; STAFF_FUZZ_VALUES='NUL|5,000 chars' sends those
 * (labels below) to every field instead, through variables (minutes, for a deeper search).
 */
import {
  buildClientSchema, getIntrospectionQuery, getNamedType, isEnumType, isInputObjectType, isInterfaceType, isNonNullType,
  isObjectType, type GraphQLField, type GraphQLInputType, type GraphQLNamedType, type GraphQLObjectType, type GraphQLOutputType, type GraphQLSchema,
} from 'graphql';
import { jest } from '@jest/globals';
import { createHash } from 'node:crypto';
import { memoryLog } from '../support/harness.js';
import { startStaffEnv, type StaffEnv } from './support.js';

const NIL = '00000000-0000-0000-0000-000000000000';
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64');
/** An enum value, printed bare inline; sent as a variable it is the string (a coercion error). */
class Enum { constructor(readonly name: string) {} }
/** Lists nested this deep, `[[[…]]]`, as text inline and in the variables (JSON.stringify stops near 4,500 levels). */
class Deep {
  constructor(readonly depth: number) {}
  text = () => `${'['.repeat(this.depth)}${']'.repeat(this.depth)}`;
}
type Wrong = [label: string, value: unknown];

/** 5,000 characters that do not compress (an index entry of 'x' × 5,000 would fit once compressed). */
const LONG = Array.from({ length: 120 }, (_, i) => createHash('sha256').update(String(i)).digest('base64')).join('').slice(0, 5000);
/** What every string-like type is also sent: the wrong kinds that are not its own. */
const COMMON: Wrong[] = [
  ['NUL', 'a\u0000b'], ['lone surrogate', '\ud800'], ['5,000 chars', LONG], ['empty', ''], ['huge integer', '9'.repeat(40)], ['x', 'x'],
  ['impossible date', '2026-02-30T25:61:00Z'], ['nil uuid', NIL], ['null', null], ['-1', -1], ['{}', {}], ['[null]', [null]], ['1e308', 1e308],
];
const WRONG: Record<string, Wrong[]> = {
  text: COMMON,
  ID: [['nobody node id', b64(['Call', NIL, NIL])], ['malformed node id', b64(['Location', 'x'])], ['short node id', b64(['Call'])],
    ['node id of no type', b64(['Nope', NIL])], ...COMMON],
  Datetime: [['infinity', 'infinity'], ['year 0', '0000-01-01T00:00:00Z'], ['year 300000', '300000-01-01T00:00:00Z'], ...COMMON],
  Date: [['infinity', 'infinity'], ['year 0', '0000-01-01'], ['impossible date', '2026-02-30'], ...COMMON],
  BigFloat: [['NaN', 'NaN'], ['Infinity', 'Infinity'], ['1e999999', '1e999999'], ...COMMON],
  BigInt: [['2^63', '9223372036854775808'], ['1.5', '1.5'], ...COMMON],
  Int: [['-1', -1], ['null', null], ['2^31 - 1', 2147483647], ['1e308', 1e308], ['huge integer', '9'.repeat(40)], ['x', 'x'], ['[null]', [null]]],
  Boolean: [['null', null], ['x', 'x'], ['-1', -1], ['{}', {}]],
  JSON: [['NUL', 'a\u0000b'], ['lone surrogate', '\ud800'], ['1e308', 1e308], ['5,000 chars', LONG], ['[null]', [null]], ['{}', {}],
    ['null', null], ['empty', ''], ['-1', -1], ['NUL key', { 'a\u0000': 1 }], ['nested 10,000 deep', new Deep(10_000)]],
  Cursor: [['garbage cursor', 'garbage'], ['base64 garbage', b64(['x'])], ['NUL', 'a\u0000b'], ['empty', ''], ['5,000 chars', LONG], ['-1', -1]],
  enum: [['no such value', new Enum('NOT_A_VALUE')], ['no such value (string)', 'NOT_A_VALUE'], ['null', null], ['[null]', [null]], ['-1', -1]],
  object: [['null', null], ['{}', {}], ['[null]', [null]], ['x', 'x']],
};
/** Values that pass coercion for these types, for the fields a probe does not replace. */
const VALID: Record<string, unknown> = {
  UUID: NIL, Datetime: '2026-01-01T12:00:00Z', Date: '2026-01-01', Int: 1, BigInt: '1', BigFloat: '1', Boolean: false, JSON: {},
  E164: '+14155550199', HttpsUrl: 'https://fuzz.example.net/x', Hhmm: '09:00', HhmmClose: '17:00',
};

const kindOf = (t: GraphQLInputType) => {
  const n = getNamedType(t);
  if (isEnumType(n)) return 'enum';
  if (isInputObjectType(n)) return 'object';
  return n.name in WRONG ? n.name : 'text';
};
const rotation: Record<string, number> = {};
/** `n` wrong values for a field of this type, the next ones of its kind's list each time. */
function wrongValues(t: GraphQLInputType, n: number): Wrong[] {
  const list = WRONG[kindOf(t)];
  const only = process.env.STAFF_FUZZ_VALUES?.split('|');
  if (only) return list.filter(([label]) => only.includes(label));
  const k = kindOf(t);
  const start = rotation[k] = ((rotation[k] ?? -n) + n) % list.length;
  return Array.from({ length: Math.min(n, list.length) }, (_, i) => list[(start + i) % list.length]);
}

/** A GraphQL literal; `hole` stands where the probed value goes. */
const HOLE = Symbol('hole');
function lit(v: unknown, hole: string): string {
  if (v === HOLE) return hole;
  if (v instanceof Enum) return v.name;
  if (v instanceof Deep) return v.text();
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return `[${v.map((x) => lit(x, hole)).join(', ')}]`;
  return `{${Object.entries(v).map(([k, x]) => `${k}: ${lit(x, hole)}`).join(', ')}}`;
}
function withHole(base: Record<string, unknown>, path: string[]): Record<string, unknown> {
  const [head, ...rest] = path;
  return { ...base, [head]: rest.length ? withHole((base[head] ?? {}) as Record<string, unknown>, rest) : HOLE };
}

function selection(t: GraphQLOutputType): string {
  const n = getNamedType(t);
  if (!isObjectType(n) && !isInterfaceType(n)) return '';
  const f = n.getFields();
  if (f.totalCount) return '{ totalCount nodes { __typename } }';
  if (f.clientMutationId) return '{ clientMutationId }';
  return f.id ? '{ __typename id }' : '{ __typename }';
}

interface Probe {
  op: 'query' | 'mutation';
  field: string;
  path: string[];
  type: GraphQLInputType;
  label: string;
  value: unknown;
  inline: boolean;
  query: string;
  /** The variables' JSON text. */
  variables?: string;
}

let probeCount = 0;
function probes(op: Probe['op'], field: GraphQLField<unknown, unknown>, base: Record<string, unknown>, path: string[], type: GraphQLInputType, n: number): Probe[] {
  const args = withHole(base, path);
  return wrongValues(type, n).map(([label, value]) => {
    // Every third probe carries its value inline: then a wrong value is GraphQL's validation error.
    const inline = !process.env.STAFF_FUZZ_VALUES && probeCount++ % 3 === 2;
    const text = (hole: string) => Object.entries(args).map(([k, v]) => `${k}: ${lit(v, hole)}`).join(', ');
    const query = `${op} Probe${inline ? '' : `($v: ${String(type)})`} { ${field.name}(${text(inline ? lit(value, '') : '$v')}) ${selection(field.type)} }`;
    return { op, field: field.name, path, type, label, value, inline, query, variables: inline ? undefined : `{"v":${value instanceof Deep ? value.text() : JSON.stringify(value instanceof Enum ? value.name : value)}}` };
  });
}

/** The service log, where a masked error's SQLSTATE is (never its message): said in a failure. */
const mem = memoryLog('info');
let env: StaffEnv;
let schema: GraphQLSchema;
let tokens: Record<'viewer' | 'operator' | 'admin', string>;
/** A row of each type (location A's where the type has one), as an admin reads it, by field name. */
const rows = new Map<string, Record<string, unknown>>();
let fingerprintSql: string;

beforeAll(async () => {
  // In-process (as in tests), PostGraphile prints forged cursors it refuses to the console; the
  // staff process withholds what it prints (docs/staff.md, "Decisions"). This file prints nothing.
  for (const k of ['error', 'warn', 'log', 'info', 'debug'] as const) jest.spyOn(console, k).mockImplementation(() => undefined);
  env = await startStaffEnv({ log: mem.log });
  tokens = { viewer: (await env.member('viewer')).token, operator: (await env.member('operator')).token, admin: (await env.member('admin')).token };
  schema = buildClientSchema((await env.gql(tokens.admin, getIntrospectionQuery())).body.data);
  for (const f of Object.values(schema.getQueryType()!.getFields())) {
    const node = isObjectType(getNamedType(f.type)) ? (getNamedType(f.type) as GraphQLObjectType).getFields().nodes : undefined;
    if (!node || !f.name.startsWith('all')) continue;
    const t = getNamedType(node.type) as GraphQLObjectType;
    const scalars = Object.values(t.getFields()).filter((x) => !x.args.length && !isObjectType(getNamedType(x.type)) && !isInterfaceType(getNamedType(x.type)));
    const byLocation = f.args.some((a) => a.name === 'condition' && 'locationId' in (getNamedType(a.type) as any).getFields());
    const r = await env.gql(tokens.admin, `query($l: UUID) { ${f.name}(first: 1${byLocation ? ', condition: { locationId: $l }' : ''}) { nodes { ${scalars.map((x) => x.name).join(' ')} } } }`,
      { l: env.seed.locations.a });
    const row = r.body.data?.[f.name]?.nodes?.[0];
    if (row) rows.set(t.name, row);
  }
  // Every table an admin's mutation could change (app and app_private, billing, staff.members), by
  // its row count and the sum of its rows' xmin (an insert, update or delete changes one or the
  // other). Not staff.audit: the staff server itself writes a row there for every request, shortly
  // after answering it, whatever the request did.
  const { rows: tables } = await env.owner.query(
    `select format('%I.%I', n.nspname, c.relname) as t from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p') and n.nspname in ('app', 'app_private', 'billing', 'staff') and (n.nspname, c.relname) <> ('staff', 'audit')
      order by 1`);
  fingerprintSql = `select concat_ws('|', ${tables.map((r) => `(select count(*) || ':' || coalesce(sum(x.xmin::text::bigint), 0) from ${r.t} x)`).join(', ')}) as d`;
}, 60_000);
afterAll(async () => {
  await env?.close();
  jest.restoreAllMocks();
});

const fingerprint = async () => (await env.owner.query({ name: 'input-fuzz-fingerprint', text: fingerprintSql })).rows[0].d as string;
const callerValues = () => Object.values(env.seed.caller).flatMap((v) => [v, v.replace(/^\+/, '')]);

/** A value of this field that coerces: the row's own where it has one, never a caller's. */
function valid(name: string, t: GraphQLInputType, row: Record<string, unknown> | undefined, nth: number): unknown {
  const n = getNamedType(t) as GraphQLNamedType;
  const own = row?.[name];
  if (own !== undefined && own !== null && !callerValues().includes(String(own))) return own;
  if (name === 'locationId') return env.seed.locations.a;
  const ref = name.endsWith('Id') ? rows.get(name[0].toUpperCase() + name.slice(1, -2))?.rowId : undefined;
  if (ref !== undefined) return ref;
  if (n.name === 'ID') return b64(['Location', NIL]);
  return n.name in VALID ? VALID[n.name] : `fuzz-${nth}`;
}

function queryProbes(): Probe[] {
  const out: Probe[] = [];
  for (const f of Object.values(schema.getQueryType()!.getFields())) {
    if (!f.args.length) continue;
    const t = getNamedType(f.type);
    const row = f.name === 'node' ? rows.get('Location') : rows.get(t.name);
    const base: Record<string, unknown> = {};
    for (const a of f.args) if (isNonNullType(a.type)) base[a.name] = valid(a.name, a.type, row, 0);
    for (const a of f.args) {
      if (isInputObjectType(getNamedType(a.type))) {
        out.push(...probes('query', f, base, [a.name], a.type, 1));
        for (const c of Object.values((getNamedType(a.type) as any).getFields()) as { name: string; type: GraphQLInputType }[]) {
          out.push(...probes('query', f, base, [a.name, c.name], c.type, 1));
        }
      } else out.push(...probes('query', f, base, [a.name], a.type, 2));
    }
  }
  return out;
}

function mutationProbes(): Probe[] {
  const out: Probe[] = [];
  const mutations = Object.values(schema.getMutationType()!.getFields());
  for (const [i, f] of mutations.entries()) {
    const kind = /^(create|update|delete)/.exec(f.name)?.[1];
    const row = rows.get(f.name.replace(/^(create|update|delete)/, '').replace(/By[A-Z].*$/, ''));
    const input = getNamedType(f.args[0].type) as any;
    const base: Record<string, unknown> = {};
    const objects: [string, any][] = [];
    for (const x of Object.values(input.getFields()) as { name: string; type: GraphQLInputType }[]) {
      const n = getNamedType(x.type);
      if (isInputObjectType(n)) {
        objects.push([x.name, n]);
        base[x.name] = {};
        for (const y of Object.values(n.getFields())) {
          if (isNonNullType(y.type)) (base[x.name] as Record<string, unknown>)[y.name] = valid(y.name, y.type, undefined, i);
        }
      } else if (isNonNullType(x.type)) {
        // A delete names nobody's row: a probe of its other fields must not delete a real one.
        base[x.name] = kind === 'delete' ? (getNamedType(x.type).name === 'ID' ? b64([getNamedType(f.type).name, NIL]) : valid(x.name, x.type, undefined, i)) : valid(x.name, x.type, row, i);
        if (kind === 'delete' && x.name === 'locationId') base[x.name] = NIL;
      }
    }
    for (const x of Object.values(input.getFields()) as { name: string; type: GraphQLInputType }[]) {
      out.push(...probes('mutation', f, { input: base }, ['input', x.name], x.type, 1));
    }
    for (const [name, n] of objects) {
      const fields = Object.values(n.getFields()) as { name: string; type: GraphQLInputType }[];
      const users = mutations.filter((m) => Object.values((getNamedType(m.args[0].type) as any).getFields()).some((x: any) => getNamedType(x.type) === n));
      // A field of an input type several mutations share (CallPatch) is probed under one of them, in turn.
      const mine = users.indexOf(f);
      for (const [j, y] of fields.entries()) {
        if (j % users.length !== mine) continue;
        out.push(...probes('mutation', f, { input: base }, ['input', name, y.name], y.type, 1));
      }
    }
  }
  // Probes run with the base values captured when they were built; later probes may see rows an
  // earlier one changed (an admin's update that succeeded), which is fine: each is judged alone.
  return out;
}

interface Tally { probes: number; errors: number; successes: number; status: Record<number, number> }

async function send(token: string, p: Probe, tally: Tally, failures: string[], viewer: boolean): Promise<boolean> {
  const res = await fetch(`${env.staff.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${token}` },
    body: `{"query":${JSON.stringify(p.query)}${p.variables ? `,"variables":${p.variables}` : ''}}`,
  });
  const r = { status: res.status, text: await res.text(), body: undefined as any };
  try {
    r.body = JSON.parse(r.text);
  } catch {
    // Not JSON: a failure below.
  }
  tally.probes += 1;
  tally.status[r.status] = (tally.status[r.status] ?? 0) + 1;
  const errors: any[] = r.body?.errors ?? [];
  if (errors.length) tally.errors += 1;
  else tally.successes += 1;
  const what = `${p.field}(${p.path.join('.')} = ${p.label}${p.inline ? ', inline' : ''})`;
  if (r.status >= 500 || r.body === undefined) failures.push(`${what} → ${r.status} ${r.text.slice(0, 200)}`);
  for (const e of errors.filter((x) => x.extensions?.code === 'INTERNAL_ERROR')) {
    const logged = mem.records().find((x) => x.error_id === e.extensions.error_id);
    failures.push(`${what} → INTERNAL_ERROR (${logged?.kind} SQLSTATE ${logged?.sqlstate} in ${logged?.routine})`);
  }
  // An error raised while the request ran (the answer has `data`) carries a code a client can
  // branch on; request errors (no `data`: the document or variables did not validate) are GraphQL's.
  if (r.body && 'data' in r.body) {
    for (const e of errors.filter((x) => typeof x.extensions?.code !== 'string')) failures.push(`${what} → an error without a code: ${String(e.message).slice(0, 80)}`);
  }
  if (viewer) {
    // No probe selects caller content or sends a caller's value: any of them here came out of an error.
    const leaked = callerValues().filter((v) => r.text.includes(v));
    if (leaked.length) failures.push(`${what} → a viewer's answer holds caller data (${leaked.length} values)`);
  }
  return errors.length > 0 || r.status >= 400;
}

test('wrong arguments and input fields on every query and mutation are clear client errors, leak nothing and change nothing', async () => {
  const failures: string[] = [];
  const tally: Tally = { probes: 0, errors: 0, successes: 0, status: {} };
  const qs = queryProbes();
  // Reads first, while the seed's rows are as they were made.
  for (const role of ['operator', 'viewer'] as const) {
    for (const p of qs) await send(tokens[role], p, tally, failures, role === 'viewer');
  }
  const ms = mutationProbes();
  let last = await fingerprint();
  let refused = 0;
  for (const p of ms) {
    const wasRefused = await send(tokens.admin, p, tally, failures, false);
    const now = await fingerprint();
    if (wasRefused) {
      refused += 1;
      if (now !== last) failures.push(`${p.field}(${p.path.join('.')} = ${p.label}${p.inline ? ', inline' : ''}) was refused, and a table changed`);
    }
    last = now;
  }
  expect({ failures: failures.length, first: failures.slice(0, 40) }).toEqual({ failures: 0, first: [] });
  // The net reached the schema (2,679 probes when written: 792 per reading role, 1,095 mutations,
  // 860 of them refused), and it is no net if everything is refused or everything accepted.
  expect(tally.probes).toBeGreaterThan(2000);
  expect(refused).toBeGreaterThan(500);
  expect(tally.errors).toBeGreaterThan(1000);
  expect(tally.successes).toBeGreaterThan(100);
}, 120_000);
