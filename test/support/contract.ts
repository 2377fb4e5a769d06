/**
 * Response shapes cannot drift: every answer the REST tests receive through the shared client
 * (`request` in harness.ts) is validated against the response the OpenAPI document publishes for
 * that operation (method + path template) and status, with a JSON Schema 2020-12 validator (ajv,
 * the OpenAPI 3.1 dialect; `$ref`s to components resolved). Error answers are validated against
 * the error envelope (`components.schemas.Error`). A mismatch throws, so the calling test fails
 * with the operation, status and ajv's errors. Each validated operation × status is recorded
 * (test/rest/contract.test.ts proves every documented one is reached).
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { buildOpenApi } from '../../src/http/openapi.js';
import { routes } from '../../src/http/routes/index.js';

type Json = Record<string, any>;

// ajv-formats is CommonJS: its default export is the module object under NodeNext typing.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv2020) => void;

/**
 * The document GET /api/v1/openapi.json serves (built from the same route registry), in its closed
 * build: every answer schema flat and with `additionalProperties: false`, as zod wrote it. The
 * served document publishes answer schemas open and composed (src/http/openapi-components.ts
 * `openAnswers`; test/rest/openapi.test.ts proves that is the only difference), so an answer that
 * conforms here conforms to the served document, and an undocumented field still fails.
 */
export const openApiDocument: Json = buildOpenApi(routes, { closed: true });

const COMPONENTS = 'https://switchboard.invalid/openapi/components';
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const PREFIX = '/api/v1';

const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv);

/** `#/components/schemas/X` → the components document registered above; other nodes copied. */
function rebase(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rebase);
  if (!node || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')
      ? `${COMPONENTS}#/$defs/${v.slice('#/components/schemas/'.length)}`
      : rebase(v);
  }
  return out;
}

ajv.addSchema({ $id: COMPONENTS, $defs: rebase(openApiDocument.components.schemas) as Json });

/** A response object, following `#/components/responses/…`. */
function resolveResponse(r: Json): Json {
  if (typeof r.$ref === 'string') return openApiDocument.components.responses[r.$ref.split('/').pop()!];
  return r;
}

/**
 * An operation's responses by status: its success responses, and each status of its
 * `x-error-statuses` mapped to the shared error response that covers it (`4XX`, else `default`).
 */
function responsesByStatus(op: Json): Json {
  const out: Json = Object.fromEntries(Object.entries<Json>(op.responses).filter(([s]) => /^\d{3}$/.test(s)));
  for (const status of (op['x-error-statuses'] ?? []) as number[]) {
    out[String(status)] = op.responses[`${String(status)[0]}XX`] ?? op.responses.default;
  }
  if (op.responses.default) out.default = op.responses.default;
  return out;
}

export interface Operation {
  method: string;
  template: string;
  operationId: string;
  /** Its tag: the area it belongs to. */
  tag: string;
  regex: RegExp;
  /** Literal segments: a more literal template wins when two match. */
  literal: number;
  /** By status (`responsesByStatus`): a status is documented when the operation lists it. */
  responses: Json;
}

// Path items with their own `servers` (the voice platform's webhooks under /api) are not token operations.
export const operations: Operation[] = Object.entries<Json>(openApiDocument.paths).filter(([, item]) => !item.servers).flatMap(([template, item]) =>
  METHODS.filter((m) => item[m]).map((method) => ({
    method,
    template,
    operationId: item[method].operationId as string,
    tag: (item[method].tags as string[])[0],
    regex: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}/?$`),
    literal: template.split('/').filter((s) => s && !s.startsWith('{')).length,
    responses: responsesByStatus(item[method]),
  })));

const validators = new Map<string, ValidateFunction>();
function validatorFor(key: string, schema: Json): ValidateFunction {
  let v = validators.get(key);
  if (!v) {
    v = ajv.compile(rebase(schema) as Json);
    validators.set(key, v);
  }
  return v;
}
const errorValidator = () => validatorFor('Error', { $ref: '#/components/schemas/Error' });

/** Operation × status pairs validated in this test file (`GET /locations/{locationId} 200`). */
export const validated = new Set<string>();
export const pairKey = (method: string, template: string, status: string | number) => `${method.toUpperCase()} ${template} ${status}`;

/** The documented operation a request path (with or without /api/v1, query ignored) names, if any. */
export function operationOf(method: string, url: string): { op?: Operation; pathKnown: boolean; api: boolean } {
  let path = url.split('?')[0].split('#')[0];
  const prefixed = path === PREFIX || path.startsWith(`${PREFIX}/`);
  if (prefixed) path = path.slice(PREFIX.length) || '/';
  const candidates = operations.filter((o) => o.regex.test(path)).sort((a, b) => b.literal - a.literal);
  const best = candidates[0];
  const same = best ? candidates.filter((o) => o.template === best.template) : [];
  return {
    op: same.find((o) => o.method === method.toLowerCase()),
    pathKnown: same.length > 0,
    api: prefixed && !['/openapi.json', '/docs'].includes(path.replace(/\/$/, '')),
  };
}

/**
 * Checks one answer against the document; returns the problems (empty when it conforms or the
 * request is not one of the documented API's). `body` is the parsed JSON, or the raw text.
 */
export function contractProblems(method: string, url: string, status: number, body: unknown, contentType: string | null): string[] {
  if (method.toUpperCase() === 'HEAD' || method.toUpperCase() === 'OPTIONS') return [];
  const { op, pathKnown, api } = operationOf(method, url);
  const name = op ? `${op.method.toUpperCase()} ${op.template}` : `${method.toUpperCase()} ${url}`;
  if (!op) {
    // Not a documented operation: only an error envelope is promised (404 unknown route, 405).
    if ((api || pathKnown) && status >= 400) return check(name, status, 'Error', errorValidator(), body, contentType);
    return [];
  }
  const documented = op.responses[String(status)];
  if (!documented && status < 400) return [`${name}: status ${status} is not documented (${Object.keys(op.responses).join(', ')})`];
  const response = resolveResponse(documented ?? op.responses.default);
  const schema = response?.content?.['application/json']?.schema;
  if (!schema) return [`${name} ${status}: the document declares no JSON body`];
  const key = documented ? String(status) : 'default';
  const problems = check(name, status, key, validatorFor(`${op.method} ${op.template} ${key}`, schema), body, contentType);
  if (!problems.length) validated.add(pairKey(op.method, op.template, key));
  return problems;
}

function check(name: string, status: number, key: string, v: ValidateFunction, body: unknown, contentType: string | null): string[] {
  if (!/^application\/json\b/.test(contentType ?? '')) return [`${name} ${status}: content-type ${contentType}, not application/json`];
  if (v(body)) return [];
  return (v.errors ?? []).map((e) => `${name} ${status} (schema of ${key}): ${e.instancePath || '/'} ${e.message}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''}`);
}

/** Throws when the answer does not conform (used by harness.ts `request`). */
export function assertConforms(method: string, url: string, status: number, body: unknown, contentType: string | null): void {
  const problems = contractProblems(method, url, status, body, contentType);
  if (problems.length) throw new Error(`Response does not match the OpenAPI document:\n${problems.slice(0, 20).join('\n')}`);
}
