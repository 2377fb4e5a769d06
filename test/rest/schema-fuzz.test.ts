/**
 * The published OpenAPI document states the rules the server enforces: for every write operation
 * (POST/PUT/PATCH) it publishes, bodies generated from its request schema are sent to the real
 * server and never answered 400. The only bodies left out are those breaking a rule the document
 * itself lists as not expressible in JSON Schema (the operation's `x-rules-not-in-schema`, and the
 * general rules of info.description); each such rule has its predicate below, and an unknown rule
 * id fails the test.
 *
 * Generator: json-schema-faker (seeded, so deterministic). It reads JSON Schema 2020-12 directly
 * (pattern, enum, lengths, ranges, anyOf/null, additionalProperties: false, minProperties,
 * uniqueItems), which is what the document contains; fast-check would need a JSON-Schema →
 * arbitrary translation written here, i.e. a second reading of the schema that could share our
 * mistakes. Operations are read from the served document, so routes added later are covered too.
 */
import fs from 'node:fs';
import path from 'node:path';
import { generate } from 'json-schema-faker';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { MAX_JSON_DEPTH, jsonDepth } from '../../src/http/body.js';
import { RULES, type RuleId } from '../../src/http/rules.js';
import { E164_PATTERN, HTTP_URL_PATTERN, HTTPS_URL_PATTERN, TIME_ZONE_PATTERN } from '../../src/http/schemas.js';
import { TIME_ZONES } from '../../src/http/timezones.js';
import { startApiWorld, tokenOperations, type ApiWorld, type Json } from '../support/api-world.js';
import { request } from '../support/harness.js';

const ZONES = new Set<string>(TIME_ZONES);

/** Bodies sent per operation, and generation attempts allowed to find them. */
const BODIES = 25;
const MAX_ATTEMPTS = 3000;
/** Fewer sendable bodies than this means the filters, not the schema, decide: a failure. */
const MIN_SENT = 10;
const SEED = 20261121;

let w: ApiWorld;
let doc: Json;
let dbZones: Set<string>;

beforeAll(async () => {
  w = await startApiWorld();
  doc = w.doc;
  dbZones = new Set((await w.t.owner.query('select name from pg_timezone_names')).rows.map((r) => r.name));
});
afterAll(() => w.close());

/** Calls `visit` on every (schema, value) pair of a body, following properties, items and anyOf. */
function walk(schema: Json | undefined, value: unknown, visit: (s: Json, v: unknown) => void): void {
  if (!schema || typeof schema !== 'object') return;
  visit(schema, value);
  for (const alt of schema.anyOf ?? []) walk(alt, value, visit);
  if (Array.isArray(value) && schema.items) for (const v of value) walk(schema.items, v, visit);
  if (value && typeof value === 'object' && !Array.isArray(value) && schema.properties) {
    for (const [k, v] of Object.entries(value)) walk(schema.properties[k], v, visit);
  }
}

const every = (schema: Json, body: unknown, ok: (s: Json, v: unknown) => boolean) => {
  let all = true;
  walk(schema, body, (s, v) => {
    if (!ok(s, v)) all = false;
  });
  return all;
};

const minutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3));

/** One predicate per documented rule: true when the body obeys it. */
const PREDICATES: Record<RuleId, (schema: Json, body: any) => boolean> = {
  phone_valid: (schema, body) =>
    every(schema, body, (s, v) => !(s.pattern === E164_PATTERN && typeof v === 'string') || !!parsePhoneNumberFromString(v, 'US')?.isValid()),
  emails_distinct: (schema, body) =>
    every(schema, body, (s, v) => !(s.uniqueItems && s.items?.format === 'email' && Array.isArray(v))
      || new Set(v.map((e: string) => e.toLowerCase())).size === v.length),
  hours_consistent: (_schema, body) => Array.isArray(body) && body.every((a: any, i: number) =>
    minutes(a.open) < minutes(a.close) && body.every((b: any, j: number) =>
      j <= i || a.day !== b.day || !(minutes(a.open) < minutes(b.close) && minutes(b.open) < minutes(a.close)))),
  member_reference: (_schema, body) => body?.assigned_to === undefined || body.assigned_to === null,
  ipv6_literal: (schema, body) =>
    every(schema, body, (s, v) => !([HTTPS_URL_PATTERN, HTTP_URL_PATTERN].includes(s.pattern) && typeof v === 'string') || URL.canParse(v)),
  // The server under test runs with WEBHOOK_ALLOW_PRIVATE_TARGETS=true (no DNS here), so this rule is
  // not in force; test/net/ssrf.test.ts covers it.
  public_target: () => true,
  timezone_known: (schema, body) =>
    every(schema, body, (s, v) => !(s.pattern === TIME_ZONE_PATTERN && typeof v === 'string') || (ZONES.has(v) && dbZones.has(v))),
};

/** The general rules of info.description. */
function obeysGeneralRules(schema: Json, body: unknown): boolean {
  const text = JSON.stringify(body);
  if (Buffer.byteLength(text) > 64 * 1024 || jsonDepth(body) > MAX_JSON_DEPTH) return false;
  // NUL or an unpaired surrogate anywhere.
  if (/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)) return false;
  // maxLength counted in characters (code points).
  return every(schema, body, (s, v) => !(typeof v === 'string' && typeof s.maxLength === 'number') || [...v].length <= s.maxLength);
}

const writeOperations = () => tokenOperations(doc, ['post', 'put', 'patch']);

test('the document publishes the rules it cannot express, and knows every one of them', () => {
  const ops = writeOperations();
  expect(ops.length).toBeGreaterThanOrEqual(15);
  for (const { method, path: p, op } of ops) {
    if (!op.requestBody) continue;
    // Written only when the body has such rules: absent is none.
    const listed: string[] = op['x-rules-not-in-schema'] ?? [];
    expect([method, p, Array.isArray(listed)]).toEqual([method, p, true]);
    for (const id of listed) {
      expect(Object.keys(RULES)).toContain(id);
      expect(op.description).toContain(`\`${id}\``);
      expect(doc.info.description).toContain(RULES[id as RuleId]);
    }
  }
  expect(doc.info.description).toContain('JSON nests at most 32 levels');
});

test('the accepted time-zone list is exactly the database’s Area/Location names (and UTC) that Intl knows, and the document publishes their shape', () => {
  const expected = [...dbZones]
    .filter((n) => n.includes('/') || n === 'UTC')
    .filter((n) => {
      try {
        new Intl.DateTimeFormat('en-US', { timeZone: n });
        return true;
      } catch {
        return false;
      }
    })
    .sort();
  if (process.env.UPDATE_TIMEZONES === '1') {
    const file = path.join(process.cwd(), 'src/http/timezones.ts');
    const head = fs.readFileSync(file, 'utf8').split('export const TIME_ZONES')[0];
    const rows: string[] = [];
    for (let i = 0; i < expected.length; i += 4) rows.push(`  ${expected.slice(i, i + 4).map((z) => `'${z}'`).join(', ')},`);
    fs.writeFileSync(file, `${head}export const TIME_ZONES = [\n${rows.join('\n')}\n] as const;\n`);
  }
  expect([...TIME_ZONES]).toEqual(expected);
  const schema = doc.paths['/locations/{locationId}'].patch.requestBody.content['application/json'].schema;
  // The document publishes the shape (and the rule timezone_known), not the list: every listed name has it.
  expect(schema.properties.timezone).toMatchObject({ type: 'string', pattern: TIME_ZONE_PATTERN });
  expect(TIME_ZONES.filter((n) => !new RegExp(TIME_ZONE_PATTERN).test(n))).toEqual([]);
});

test('phones, URLs and time zones carry their rules in the schema', () => {
  const body = (p: string, m: string) => doc.paths[p][m].requestBody.content['application/json'].schema;
  const lead = body('/locations/{locationId}/leads', 'post');
  expect(lead.properties.phone.pattern).toBe(E164_PATTERN);
  expect(body('/locations/{locationId}/webhook-endpoints', 'post').properties.url.pattern).toBe(HTTPS_URL_PATTERN);
  expect(body('/locations/{locationId}/integrations', 'post').properties.webhook_url.pattern).toBe(HTTPS_URL_PATTERN);
  const settings = body('/locations/{locationId}/notification-settings', 'patch');
  expect(settings.properties.sms_recipients).toMatchObject({ uniqueItems: true, maxItems: 20, items: { pattern: E164_PATTERN } });
  expect(settings.minProperties).toBe(1);
  expect(body('/locations/{locationId}/faqs', 'post').properties.question).toMatchObject({ minLength: 1, maxLength: 1000, pattern: '\\S' });
});

test('generated bodies for every write operation are never answered 400 (nor 5xx)', async () => {
  const failures: string[] = [];
  const summary: Record<string, { sent: number; filtered: number; unproduced?: number }> = {};
  for (const { method, path: p, op } of writeOperations()) {
    const url = `/api/v1${w.concretePath(p)}`;
    const key = `${method.toUpperCase()} ${p}`;
    const schema: Json | undefined = op.requestBody?.content?.['application/json']?.schema;
    if (!schema) {
      const res = await request(w.t.baseUrl, method.toUpperCase(), url, { token: w.token });
      summary[key] = { sent: 1, filtered: 0 }; // no body to generate: sent once
      if (res.status === 400 || res.status >= 500) failures.push(`${key} (no body) → ${res.status} ${JSON.stringify(res.body)}`);
      continue;
    }
    const rules: RuleId[] = op['x-rules-not-in-schema'] ?? [];
    for (const id of rules) if (!PREDICATES[id]) throw new Error(`schema-fuzz: no predicate for documented rule ${id}`);
    let sent = 0;
    let filtered = 0;
    let unproduced = 0;
    for (let attempt = 0; attempt < MAX_ATTEMPTS && sent < BODIES; attempt++) {
      let body: unknown;
      try {
        body = await generate(schema, {
          seed: SEED + attempt, maxItems: 4, optionalsProbability: 0.6,
          // Date-times in the past few days (e.g. a recovery's `since`): the generator's range, not a
          // filter. It keeps only the date of the bounds and picks any time of day, so the latest
          // day it may pick is yesterday (today's 01:01 is the future at 00:57).
          minDateTime: new Date(Date.now() - 3 * 86_400_000).toISOString(), maxDateTime: new Date(Date.now() - 86_400_000).toISOString(),
        } as never);
      } catch {
        // json-schema-faker sometimes gives up on an all-optional object with minProperties
        // ("properties … were not found while additionalProperties is false"): no body, next seed.
        unproduced += 1;
        continue;
      }
      if (!obeysGeneralRules(schema, body) || !rules.every((id) => PREDICATES[id](schema, body))) {
        filtered += 1;
        continue;
      }
      sent += 1;
      const res = await request(w.t.baseUrl, method.toUpperCase(), url, { token: w.token, body });
      if (res.status === 400 || res.status >= 500) {
        failures.push(`${key} ${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body.error ?? res.body)}`);
      }
    }
    summary[key] = { sent, filtered, unproduced };
  }
  if (process.env.SCHEMA_FUZZ_SUMMARY) console.log(summary);
  expect(failures).toEqual([]);
  const thin = Object.entries(summary).filter(([, s]) => s.unproduced !== undefined && s.sent < MIN_SENT);
  expect(thin).toEqual([]);
});
