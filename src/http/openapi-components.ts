/**
 * Named components of the OpenAPI document, made by zod itself: a schema given a name with
 * `.meta({ id: 'Lead' })` (zod's global registry) is pulled out by `z.toJSONSchema` into `$defs`
 * wherever it is used, and this collector moves those definitions to `components.schemas` and
 * points the `$ref`s there. Nothing here describes a resource by hand: the zod schemas the routes
 * validate with are the only source.
 *
 * A request reads a schema's input side and a response its output side. Most named schemas look
 * the same both ways and get one component; one whose input differs (a transform, a default, a
 * field a request may leave out) gets a second component `<Name>Input` for the request side.
 */
import { isDeepStrictEqual } from 'node:util';
import { z, type ZodType } from 'zod';

type Json = Record<string, any>;
type Io = 'input' | 'output';

const DEFS = '#/$defs/';
/** Input-side references stay in this form until `finish` knows whether they need `<Name>Input`. */
const INPUT_REF = '#/$input/';
export const SCHEMAS = '#/components/schemas/';

const SCALARS = new Set(['string', 'number', 'integer', 'boolean']);

/** Formats that say what zod's regex beside them checks (RFC 3339 dates and times, RFC 9562 UUIDs). */
const FORMATS_OWN_PATTERN = new Set(['date', 'date-time', 'uuid']);

/**
 * Leaves out what zod writes beside a format that already says it: its regex next to `date`,
 * `date-time` and `uuid` (200–300 characters each, 7 KB of the document), and on the response
 * side the ±(2^53−1) bounds of every integer (a JSON number beyond them is not exact anyway).
 * The `email` regex stays: the server accepts less than the `email` format allows.
 */
function lean({ jsonSchema }: { jsonSchema: Json }, io: Io): void {
  if (typeof jsonSchema.pattern === 'string' && FORMATS_OWN_PATTERN.has(jsonSchema.format)) delete jsonSchema.pattern;
  // A nullable scalar with constraints: `type: [<type>, "null"]` (as zod writes one without), not `anyOf` with null.
  const [value, nul, ...more] = Array.isArray(jsonSchema.anyOf) ? jsonSchema.anyOf : [];
  if (!more.length && nul?.type === 'null' && Object.keys(nul).length === 1 && SCALARS.has(value?.type) && !('enum' in value) && !('const' in value)) {
    delete jsonSchema.anyOf;
    Object.assign(jsonSchema, { ...value, ...jsonSchema, type: [value.type, 'null'] });
  }
  if (io === 'output' && jsonSchema.type === 'integer') {
    if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
    if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
  }
}

/**
 * `z.toJSONSchema` with the options every schema the API publishes uses (this document and
 * GET /event-types): JSON Schema 2020-12, leaned (above). A named schema used with its own
 * description (`uuid.describe('…')`) is a `$ref` beside which zod repeats the target's regex even
 * when the override took it off the target: it goes too.
 */
export function toPublishedJsonSchema(s: ZodType, io: Io): Json {
  const js = z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'draft-2020-12', override: (ctx) => lean(ctx as { jsonSchema: Json }, io) }) as Json;
  const defs: Json = js.$defs ?? {};
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (!node || typeof node !== 'object') return;
    const n = node as Json;
    if (typeof n.$ref === 'string' && typeof n.pattern === 'string' && n.$ref.startsWith(DEFS)
      && FORMATS_OWN_PATTERN.has(defs[n.$ref.slice(DEFS.length)]?.format)) delete n.pattern;
    Object.values(n).forEach(walk);
  };
  walk(js);
  return js;
}

/** `z.toJSONSchema` as the document uses it: JSON Schema 2020-12 (the OpenAPI 3.1 dialect). */
export function jsonSchemaOf(s: ZodType, io: Io): Json {
  const { $schema: _drop, ...rest } = toPublishedJsonSchema(s, io);
  return rest;
}

function mapRefs(node: unknown, fn: (ref: string) => string): any {
  if (Array.isArray(node)) return node.map((n) => mapRefs(n, fn));
  if (!node || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === '$ref' && typeof v === 'string' ? fn(v) : mapRefs(v, fn);
  return out;
}

const refsIn = (node: unknown, prefix: string, into = new Set<string>()): Set<string> => {
  mapRefs(node, (r) => {
    if (r.startsWith(prefix)) into.add(r.slice(prefix.length));
    return r;
  });
  return into;
};

/** The zod id a schema was named with, if any (`.meta({ id })`). */
export const nameOf = (s: ZodType | undefined): string | undefined =>
  s ? (z.globalRegistry.get(s) as { id?: string } | undefined)?.id : undefined;

export class Components {
  private readonly defs: Record<Io, Map<string, Json>> = { input: new Map(), output: new Map() };
  /** Components the document adds around the zod ones (envelopes, the list pages). */
  private readonly extra = new Map<string, Json>();

  /** The JSON Schema of `s`, its named parts moved to components; a named root becomes a `$ref`. */
  schema(s: ZodType, io: Io): Json {
    const { $defs, ...root } = jsonSchemaOf(s, io);
    const id = nameOf(s);
    const target = io === 'output' ? SCHEMAS : INPUT_REF;
    const defs: Json = { ...($defs ?? {}) };
    // zod answers a named root as a `$ref` to its own entry in `$defs`, or inline.
    if (id && !defs[id]) defs[id] = root;
    for (const [name, def] of Object.entries<Json>(defs)) {
      const moved = mapRefs(def, (r) => (r.startsWith(DEFS) ? target + r.slice(DEFS.length) : r));
      const seen = this.defs[io].get(name);
      if (seen && !isDeepStrictEqual(seen, moved)) throw new Error(`Two different zod schemas are named ${name}`);
      this.defs[io].set(name, moved);
    }
    if (id) return { $ref: target + id };
    return mapRefs(root, (r) => (r.startsWith(DEFS) ? target + r.slice(DEFS.length) : r));
  }

  /** A component built by the document itself (an envelope); the same name must mean the same shape. */
  add(name: string, schema: Json): Json {
    const seen = this.extra.get(name);
    if (seen && !isDeepStrictEqual(seen, schema)) throw new Error(`Two different shapes are named ${name}`);
    if (this.defs.output.has(name) || this.defs.input.has(name)) throw new Error(`${name} is already a zod schema's name`);
    this.extra.set(name, schema);
    return { $ref: SCHEMAS + name };
  }

  /**
   * Resolves input-side names (`<Name>` when its input equals its output, else `<Name>Input`),
   * rewrites every pending reference in `doc` and returns `components.schemas`, sorted by name.
   * Unless `closed`, the schemas only answers use are published open and composed (`openAnswers`).
   */
  finish(doc: Json, closed = false): { doc: Json; schemas: Json } {
    const { input, output } = this.defs;
    const needsOwn = new Set<string>();
    const differs = (name: string) => {
      const out = output.get(name);
      if (!out) return true;
      const asOutput = mapRefs(input.get(name), (r) => (r.startsWith(INPUT_REF) ? SCHEMAS + r.slice(INPUT_REF.length) : r));
      return !isDeepStrictEqual(asOutput, out);
    };
    for (const name of input.keys()) if (differs(name)) needsOwn.add(name);
    // A schema that refers to one with its own input component needs one too.
    for (let changed = true; changed;) {
      changed = false;
      for (const [name, def] of input) {
        if (needsOwn.has(name)) continue;
        if ([...refsIn(def, INPUT_REF)].some((r) => needsOwn.has(r) && output.has(r))) {
          needsOwn.add(name);
          changed = true;
        }
      }
    }
    const inputName = (name: string) => (needsOwn.has(name) && output.has(name) ? `${name}Input` : name);
    const resolve = (node: unknown) =>
      mapRefs(node, (r) => (r.startsWith(INPUT_REF) ? SCHEMAS + inputName(r.slice(INPUT_REF.length)) : r));
    const schemas: Json = {};
    for (const [name, def] of output) schemas[name] = def;
    for (const [name, def] of input) if (needsOwn.has(name)) schemas[inputName(name)] = resolve(def);
    for (const [name, def] of this.extra) schemas[name] = def;
    const sorted = Object.fromEntries(Object.keys(schemas).sort().map((k) => [k, schemas[k]]));
    if (!closed) openAnswers(sorted, new Set(Object.keys(sorted).filter((name) => !input.has(name))));
    return { doc: resolve(doc), schemas: sorted };
  }
}

/** `schema` without `additionalProperties: false`, at any depth. */
export function open(node: unknown): any {
  if (Array.isArray(node)) return node.map(open);
  if (!node || typeof node !== 'object') return node;
  return Object.fromEntries(Object.entries(node).filter(([k, v]) => !(k === 'additionalProperties' && v === false)).map(([k, v]) => [k, open(v)]));
}

/** A base needs this many properties: composition is for records, not for two shared ids. */
const MIN_BASE_PROPERTIES = 5;

/**
 * The schemas only answers (responses, event bodies) use, rewritten in place:
 * - open: no `additionalProperties: false`. The compatibility policy lets an answer gain a field
 *   (docs/api-contract.md "Compatibility and deprecation"); a document that closes them tells a
 *   validating client to reject it. The server still sends exactly the documented fields:
 *   test/support/contract.ts validates every answer against the closed build (`buildOpenApi(routes, { closed: true })`).
 * - composed: a record that is another record plus fields (Call = CallSummary + transcript…,
 *   LeadUpdatedData = Lead + previous_status) is `allOf: [<base>]` plus its own fields, the base
 *   being the largest such record. Possible only because the base is open; generators read it as
 *   an extension of the base type.
 */
function openAnswers(schemas: Json, answersOnly: Set<string>): void {
  for (const name of answersOnly) schemas[name] = open(schemas[name]);
  const propsOf = (s: Json): Json | undefined => (s.type === 'object' && s.properties && !s.allOf ? s.properties : undefined);
  for (const name of answersOnly) {
    const derived = schemas[name];
    const own = propsOf(derived);
    if (!own) continue;
    let base: string | undefined;
    for (const candidate of answersOnly) {
      const props = candidate === name ? undefined : propsOf(schemas[candidate]);
      if (!props) continue;
      const keys = Object.keys(props);
      if (keys.length < MIN_BASE_PROPERTIES || keys.length >= Object.keys(own).length) continue;
      if (!keys.every((k) => k in own && isDeepStrictEqual(own[k], props[k]))) continue;
      if (!((schemas[candidate].required ?? []) as string[]).every((r) => (derived.required ?? []).includes(r))) continue;
      if (!base || keys.length > Object.keys(schemas[base].properties).length) base = candidate;
    }
    if (!base) continue;
    const { properties: baseProps, required: baseRequired = [] } = schemas[base];
    const { properties: _p, required = [], type: _t, ...rest } = derived;
    const extra = (required as string[]).filter((r) => !baseRequired.includes(r));
    schemas[name] = {
      ...rest,
      allOf: [{ $ref: SCHEMAS + base }],
      type: 'object',
      properties: Object.fromEntries(Object.entries(own).filter(([k]) => !(k in baseProps))),
      ...(extra.length ? { required: extra } : {}),
    };
  }
}
