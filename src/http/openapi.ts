/**
 * OpenAPI 3.1 document built from the route registry: the same zod schemas that validate requests
 * (zod 4's native z.toJSONSchema, JSON Schema 2020-12 = the OpenAPI 3.1 dialect) — no hand copy.
 * Every schema named with `.meta({ id })` becomes a component (src/http/openapi-components.ts);
 * envelopes, list pages, pagination parameters and headers are named components too.
 */
import { isDeepStrictEqual } from 'node:util';
import { Router } from 'express';
import type { ZodType } from 'zod';
import { publishedEvents } from '../webhooks/events.js';
import { mountDocsPage } from './docs-page.js';
import { ErrorEnvelope } from './errors.js';
import { getOnly } from './route.js';
import { Components, jsonSchemaOf, nameOf, SCHEMAS } from './openapi-components.js';
import { INFO, SECURITY_SCHEMES, TAGS } from './openapi-info.js';
import { voiceOperations } from './platform/voice-payloads.js';
import { toolOperations } from './platform/tool-schemas.js';
import { locationParam, pageQuery, type RouteSpec } from './route.js';

type Json = Record<string, any>;

/**
 * What each error status means. Every error answer is the `Error` envelope, so an operation names
 * two shared responses, `4XX` (Error4XX) and `default` (ErrorDefault), which state these texts once,
 * and lists the statuses it can answer in `x-error-statuses` (test/rest/contract.test.ts provokes
 * each one). One `$ref` per status and operation was 27 KB of the document.
 */
const ERROR_CODES: Record<number, string> = {
  400: 'Validation failed (validation_error, oauth_required), body not JSON or nested deeper than 32 levels (invalid_json), body not decodable with its Content-Encoding (invalid_body), Idempotency-Key empty, over 255 characters, repeated or not printable ASCII (invalid_idempotency_key)',
  401: 'Missing, malformed, unknown or revoked bearer token (unauthorized)',
  403: 'The token lacks the required scope (forbidden; details.required_scope)',
  404: 'No such resource, or another location\'s (not_found)',
  409: 'Conflict or invalid status move (conflict, invalid_transition); on a POST, a request with the same Idempotency-Key still being processed (idempotency_key_in_use: retry later)',
  410: 'The answer stored under this Idempotency-Key held a caller\'s personal data that has since been erased (idempotency_answer_erased): it is not replayed and the request does not run again; send a new key',
  413: 'Body over 64 KiB (payload_too_large)',
  415: 'Body not JSON, a Content-Encoding other than gzip, deflate, br, or a Transfer-Encoding other than chunked (unsupported_media_type)',
  422: 'The Idempotency-Key was already used for a different request (idempotency_key_reused): another method, path or body; connecting ServiceTitan, it refused the client credentials (provider_rejected; details.reason)',
  429: 'Per-key rate limit (rate_limited; Retry-After, RateLimit, RateLimit-Policy)',
  502: 'Connecting ServiceTitan, its token endpoint did not answer (provider_unavailable): try again later',
  503: 'A secret the route needs is not configured on this server (not_configured)',
};
const statusList = (codes: number[]) => codes.map((c) => `- ${c}: ${ERROR_CODES[c]}`).join('\n');
const CLIENT_STATUSES = Object.keys(ERROR_CODES).map(Number).filter((c) => c < 500);
const SERVER_STATUSES = Object.keys(ERROR_CODES).map(Number).filter((c) => c >= 500);

const header = (description: string, schema: Json = { type: 'string' }) => ({ description, schema });

/**
 * Response headers an operation answers with (components.headers). The rate-limit headers every
 * authenticated answer carries are stated once, in the bearerAuth scheme (src/http/openapi-info.ts),
 * and `Idempotent-Replayed` in the Idempotency-Key parameter: repeated on each success response
 * they were 7 KB of the document.
 */
const HEADERS: Json = {
  Link: header('`<…?cursor=…>; rel="next"` when more rows exist: the next page (pagination is by opaque cursor)'),
  Deprecation: header('RFC 9745: when the operation was deprecated, as `@<unix seconds>`'),
  Sunset: header('RFC 8594: the HTTP-date after which the operation may stop working'),
};
const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });

const IDEMPOTENCY_PARAMETER: Json = {
  name: 'Idempotency-Key',
  in: 'header',
  description: 'Makes a retry safe: the first request with a key runs and its answer is stored for 24 h (per location); the same request with '
    + 'the same key gets that answer again with `Idempotent-Replayed: true`, a different request 422, a request while the first is still '
    + 'running 409. Errors are not stored (a retry runs again). Any 1–255 printable ASCII characters, e.g. a UUID; a quoted structured-field string is unquoted.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

/** Query parameters shared by every list (components.parameters), from the zod pieces in route.ts. */
const PAGE_PARAMETERS: Record<keyof typeof pageQuery, [string, string]> = {
  limit: ['Limit', 'Rows per page (1–200; default 50)'],
  cursor: ['Cursor', 'Opaque cursor from the previous page\'s Link header'],
};
const pageParameter = (name: keyof typeof pageQuery): Json => ({
  name, in: 'query', description: PAGE_PARAMETERS[name][1], schema: jsonSchemaOf(pageQuery[name], 'input'),
});

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: `${SCHEMAS}Error` } } },
});
/** The two shared error responses and the operation's own statuses (`x-error-statuses`). */
const errorResponses = (statuses: readonly number[]) => ({
  responses: { '4XX': { $ref: '#/components/responses/Error4XX' }, default: { $ref: '#/components/responses/ErrorDefault' } },
  'x-error-statuses': [...statuses],
});

/** `/locations/:locationId` → `/locations/{locationId}`. */
const oasPath = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function parameters(spec: RouteSpec, c: Components): Json[] {
  const out: Json[] = [];
  for (const [where, s] of [['path', spec.params], ['query', spec.query]] as const) {
    if (!s) continue;
    const js = c.schema(s, 'input');
    const required: string[] = js.required ?? [];
    for (const [name, prop] of Object.entries<Json>(js.properties ?? {})) {
      if (where === 'path' && name === 'locationId') {
        out.push({ $ref: '#/components/parameters/LocationId' });
        continue;
      }
      if (where === 'query' && name in PAGE_PARAMETERS && spec.list) {
        out.push({ $ref: `#/components/parameters/${PAGE_PARAMETERS[name as keyof typeof pageQuery][0]}` });
        continue;
      }
      const { description, ...schema } = prop;
      // `required: false` is the default: written only when true.
      out.push({ name, in: where, ...(where === 'path' || required.includes(name) ? { required: true } : {}), ...(description ? { description } : {}), schema });
    }
  }
  return out;
}

/**
 * The success body: `{ data: <Name> }` named `<Name>Response`, a list page `{ data: <Name>[] }`
 * named `<Name>Page`, a bare array `<Name>List`. An unnamed response stays inline (lintRoutes
 * reports it).
 */
function successSchema(spec: RouteSpec, c: Components): Json {
  const data: Json = spec.response ? c.schema(spec.response, 'output') : {};
  const envelope = (d: Json, description: string) => ({
    type: 'object', description, properties: { data: d }, required: ['data'], additionalProperties: false,
  });
  const ref: string | undefined = data.$ref ?? data.items?.$ref;
  if (!ref || Object.keys(data).length > (data.$ref ? 1 : 2)) return envelope(data, 'The answer');
  const name = ref.slice(SCHEMAS.length);
  if (data.$ref) return c.add(`${name}Response`, envelope(data, `One ${name}`));
  if (spec.list) return c.add(`${name}Page`, envelope(data, `A page of ${name} records, newest first`));
  return c.add(`${name}List`, envelope(data, `Every ${name}`));
}

const sharedResponses = new Map<string, Json>();
function sharedResponse(name: string, response: Json): Json {
  const seen = sharedResponses.get(name);
  if (seen && JSON.stringify(seen) !== JSON.stringify(response)) throw new Error(`Two different responses are named ${name}`);
  sharedResponses.set(name, response);
  return { $ref: `#/components/responses/${name}` };
}

/** A voice platform route's answer: a shared response when its schema is named. */
function handled(schema: Json): Json {
  const response = { description: 'Handled', content: { 'application/json': { schema } } };
  return schema.$ref ? sharedResponse(schema.$ref.slice(SCHEMAS.length), response) : response;
}

function operation(spec: RouteSpec, c: Components): Json {
  const auth = spec.auth !== false;
  const status = String(spec.status ?? 200);
  const idempotent = auth && spec.method === 'post';
  const headers: Json = Object.fromEntries([
    ...(spec.list ? ['Link'] : []),
    ...(spec.deprecated ? ['Deprecation', 'Sunset'] : []),
  ].map((h) => [h, headerRef(h)]));
  const success: Json = {
    description: spec.list ? 'A page, newest first; the next page is in the Link header' : 'Success',
    ...(Object.keys(headers).length ? { headers } : {}),
    content: { 'application/json': { schema: successSchema(spec, c) } },
  };
  // A named body is a named response (components.responses), shared by the operations that answer it.
  const ref: string | undefined = success.content['application/json'].schema.$ref;
  const responses: Json = {
    [status]: ref && !spec.deprecated ? sharedResponse(ref.slice(SCHEMAS.length), success) : success,
  };
  // 403 only where a scope is required, 404 only where the path names something (a location or
  // a record), 409 only where the route says it can conflict: test/rest/contract.test.ts provokes
  // every documented status of every operation.
  const named = /:[A-Za-z]/.test(spec.path);
  const errs = [400, ...(auth ? [401] : []), ...(spec.scope ? [403] : []), ...(named ? [404] : []),
    ...(spec.conflict || idempotent ? [409] : []), ...(spec.body ? [413, 415] : []), ...(idempotent && spec.callerData ? [410] : []), ...(idempotent ? [422] : []), ...(auth ? [429] : [])];
  const errors = errorResponses([...new Set([...errs, ...(spec.errors ?? [])])]);
  Object.assign(responses, errors.responses);
  const scopeText = spec.scope ? `Requires scope \`${spec.scope}\`.` : auth ? 'Any valid token (no scope).' : 'No authentication.';
  const rules = spec.rules ?? [];
  // The rule texts are in info.description once ("Rules a schema cannot state"); ids here.
  const rulesText = rules.length ? `\n\nAlso enforced (400), not expressible in JSON Schema: ${rules.map((r) => `\`${r}\``).join(', ')}.` : '';
  const sunsetText = spec.deprecated ? `\n\nDeprecated since ${spec.deprecated.since}; works until ${spec.deprecated.sunset}.` : '';
  const op: Json = {
    operationId: spec.operationId ?? mechanicalId(spec),
    summary: spec.summary,
    description: scopeText + rulesText + sunsetText,
    ...(spec.deprecated ? { deprecated: true } : {}),
    ...(rules.length ? { 'x-rules-not-in-schema': rules } : {}),
    tags: [spec.tag],
    security: auth ? [{ bearerAuth: spec.scope ? [spec.scope] : [] }] : [],
    parameters: [...parameters(spec, c), ...(idempotent ? [{ $ref: '#/components/parameters/IdempotencyKey' }] : [])],
    responses,
    'x-error-statuses': errors['x-error-statuses'],
  };
  if (!op.parameters.length) delete op.parameters;
  if (spec.body) {
    // A body schema that accepts no body at all (e.g. POST …/test) makes the body optional.
    const required = !spec.body.safeParse(undefined).success;
    op.requestBody = { required, content: { 'application/json': { schema: c.schema(spec.body, 'input') } } };
  }
  return op;
}

/**
 * The path parameters of a path with several operations are declared once, on the path item (they
 * are the same for each: they come from the path). An operation left without parameters says none.
 */
function hoistPathParameters(item: Json): void {
  const ops = Object.values<Json>(item);
  if (ops.length < 2) return;
  const isPath = (p: Json) => p.in === 'path' || p.$ref === '#/components/parameters/LocationId';
  const pathParams = (op: Json) => ((op.parameters ?? []) as Json[]).filter(isPath);
  const shared = pathParams(ops[0]);
  if (!shared.length || ops.some((op) => !isDeepStrictEqual(pathParams(op), shared))) return;
  item.parameters = shared;
  for (const op of ops) {
    op.parameters = (op.parameters as Json[]).filter((p) => !isPath(p));
    if (!op.parameters.length) delete op.parameters;
  }
}

/** Only for a route that names none (lintRoutes fails the build's tests on it). */
function mechanicalId(spec: RouteSpec): string {
  const words = spec.path.split('/').filter((s) => s && !s.startsWith(':')).flatMap((s) => s.split('-'));
  return [spec.method, ...words].map((w, i) => (i === 0 ? w : w[0].toUpperCase() + w.slice(1))).join('');
}

/** Problems a route definition has for an SDK generator: no operationId, an unnamed body or response. */
export function lintRoutes(routes: RouteSpec[]): string[] {
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const r of routes) {
    const name = `${r.method.toUpperCase()} ${r.path}`;
    if (!r.operationId) problems.push(`${name}: no operationId`);
    else if (!/^[a-z][A-Za-z0-9]+$/.test(r.operationId)) problems.push(`${name}: operationId ${r.operationId} is not lowerCamelCase`);
    else if (seen.has(r.operationId)) problems.push(`${name}: operationId ${r.operationId} is also ${seen.get(r.operationId)}`);
    else seen.set(r.operationId, name);
    if (!(r.tag in TAGS)) problems.push(`${name}: tag ${r.tag} has no description in its route module's area (src/http/route.ts defineArea)`);
    const unwrapped = r.response && (r.response as { element?: ZodType }).element;
    if (r.response && !nameOf(r.response) && !nameOf(unwrapped)) problems.push(`${name}: response schema has no .meta({ id })`);
    const body = r.body && (nameOf(r.body) ? r.body : (r.body as { unwrap?: () => ZodType }).unwrap?.());
    if (r.body && !nameOf(body)) problems.push(`${name}: body schema has no .meta({ id })`);
  }
  return problems;
}

/**
 * The document. `closed: true` builds it with every answer schema closed and flat, as zod wrote it
 * (test/support/contract.ts validates answers against that: the served document is the same with
 * answer schemas open and composed, see `openAnswers` in src/http/openapi-components.ts).
 */
export function buildOpenApi(routes: RouteSpec[], { closed = false }: { closed?: boolean } = {}): Json {
  const c = new Components();
  sharedResponses.clear();
  c.schema(ErrorEnvelope, 'output');
  const paths: Json = {};
  for (const spec of routes) (paths[oasPath(spec.path)] ??= {})[spec.method] = operation(spec, c);
  for (const item of Object.values<Json>(paths)) hoistPathParameters(item);
  for (const v of [...voiceOperations, ...toolOperations]) {
    for (const part of v.parts) c.schema(part, 'input');
    paths[v.path] = {
      servers: [{ url: '/api', description: 'Platform webhooks are served under /api, not /api/v1' }],
      post: {
        operationId: v.operationId,
        summary: v.summary,
        description: v.description,
        tags: ['Voice platform'],
        security: [{ voiceSignature: [] }],
        requestBody: { required: true, content: { 'application/json': { schema: c.schema(v.body, 'input') } } },
        responses: {
          // Named like the token operations' answers: shared by the routes that answer the same schema (the live tools).
          200: handled(c.schema(v.response, 'output')),
          ...errorResponses(v.errors).responses,
        },
        'x-error-statuses': [...v.errors],
      },
    };
  }
  const webhooks = webhooksSection(c);
  const { doc, schemas } = c.finish({ paths, webhooks, responses: Object.fromEntries(sharedResponses) }, closed);
  const usedTags = new Set([...routes.map((r) => r.tag), 'Voice platform', 'Webhook events']);
  return {
    openapi: '3.1.0',
    info: INFO,
    servers: [{ url: '/api/v1', description: 'This server' }],
    security: [{ bearerAuth: [] }],
    tags: Object.entries(TAGS).filter(([name]) => usedTags.has(name)).map(([name, description]) => ({ name, description })),
    paths: doc.paths,
    webhooks: doc.webhooks,
    components: {
      schemas,
      responses: {
        Error4XX: errorResponse(`A client error. The statuses an operation can answer are listed in its \`x-error-statuses\`:\n${statusList(CLIENT_STATUSES)}`),
        ErrorDefault: errorResponse(`A server error: internal_error (500), unavailable (503), and where the operation lists it:\n${statusList(SERVER_STATUSES)}`),
        ...Object.fromEntries([...sharedResponses.keys()].sort().map((k) => [k, doc.responses[k]])),
      },
      parameters: {
        ...Object.fromEntries(Object.entries(PAGE_PARAMETERS).map(([name, [component]]) => [component, pageParameter(name as keyof typeof pageQuery)])),
        IdempotencyKey: IDEMPOTENCY_PARAMETER,
        LocationId: { name: 'locationId', in: 'path', required: true, description: 'The location\'s UUID or slug', schema: jsonSchemaOf(locationParam, 'input') },
        ...Object.fromEntries(DELIVERY_HEADERS.map(([name, description, extra]) => [deliveryHeaderName(name),
          { name, in: 'header', required: true, description, schema: { type: 'string', ...(extra ?? {}) } }])),
      },
      // Only the headers some operation names (a deprecation header appears with the first deprecated operation).
      headers: Object.fromEntries(Object.entries(HEADERS).filter(([name]) => JSON.stringify(doc).includes(`"#/components/headers/${name}"`))),
      securitySchemes: SECURITY_SCHEMES,
    },
  };
}

/** Headers of every delivery (docs/webhooks.md), as OpenAPI header parameters. */
const DELIVERY_HEADERS: Array<[string, string, Json?]> = [
  ['user-agent', 'Service-Webhooks/1.0'],
  ['svc-event', 'The event type'],
  ['svc-event-id', 'Event id, the same on every attempt (dedupe on it)', { format: 'uuid' }],
  ['svc-delivery-id', 'Id of this attempt', { format: 'uuid' }],
  ['svc-timestamp', 'Unix seconds of this attempt', { pattern: '^[0-9]+$' }],
  ['svc-signature', '`v1=<hex HMAC-SHA256(raw body, whole secret string)>`, space-separated during a rotation overlap'],
  ['webhook-id', 'Standard Webhooks: = svc-event-id', { format: 'uuid' }],
  ['webhook-timestamp', 'Standard Webhooks: = svc-timestamp', { pattern: '^[0-9]+$' }],
  ['webhook-signature', 'Standard Webhooks: `v1,<base64 HMAC-SHA256("{webhook-id}.{webhook-timestamp}.{raw body}")>` keyed with the base64-decoded secret after `whsec_`; space-separated during a rotation overlap'],
];

/** `svc-event-id` → `DeliverySvcEventId`: the parameter component of a delivery header. */
const deliveryHeaderName = (h: string) => `Delivery${h.split('-').map((w) => w[0].toUpperCase() + w.slice(1)).join('')}`;

/** `lead.created` → `onLeadCreated`: the operationId of an event's webhook. */
export const webhookOperationId = (type: string) => `on${type.split(/[._]/).map((w) => w[0].toUpperCase() + w.slice(1)).join('')}`;

/** OpenAPI 3.1 `webhooks`: one POST per event type, its body the catalog's named event schema. */
function webhooksSection(c: Components): Json {
  return Object.fromEntries(publishedEvents.map((e) => [e.type, {
    post: {
      operationId: webhookOperationId(e.type),
      summary: e.type,
      description: e.description,
      tags: ['Webhook events'],
      security: [],
      parameters: DELIVERY_HEADERS.map(([name]) => ({ $ref: `#/components/parameters/${deliveryHeaderName(name)}` })),
      requestBody: {
        required: true,
        // The example body of each type is served by GET /event-types (and sent by POST …/test), not repeated here.
        content: { 'application/json': { schema: c.schema(e.schema, 'output') } },
      },
      responses: { '2XX': sharedResponse('WebhookReceived', { description: 'Received. Anything else (a redirect included, or no answer within 10 s) is retried.' }) },
    },
  }]));
}

/** GET /api/v1/openapi.json and GET /api/v1/docs, both without auth. The document is built once. */
export function openApiRouter(routes: RouteSpec[]): Router {
  const router = Router();
  let doc: Json | undefined;
  router.get('/openapi.json', (_req, res) => {
    doc ??= buildOpenApi(routes);
    res.json(doc);
  });
  getOnly(router, '/openapi.json');
  mountDocsPage(router, '/api/v1');
  getOnly(router, '/docs');
  return router;
}
