/**
 * OpenAPI 3.1 document built from the route registry: the same zod schemas that validate requests
 * (zod 4's native z.toJSONSchema, JSON Schema 2020-12 = the OpenAPI 3.1 dialect) — no hand copy.
 */
import { Router } from 'express';
import { z, type ZodType } from 'zod';
import { eventCatalog, eventJsonSchema } from '../webhooks/events.js';
import { mountDocsPage } from './docs-page.js';
import type { RouteSpec } from './route.js';
import { GENERAL_RULES, RULES } from './rules.js';

type Json = Record<string, any>;

function schemaOf(s: ZodType, io: 'input' | 'output'): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Json;
  return rest;
}

const ERROR_CODES: Record<number, string> = {
  400: 'Validation failed (validation_error, oauth_required), body not JSON or nested deeper than 32 levels (invalid_json), body not decodable with its Content-Encoding (invalid_body), Idempotency-Key empty, over 255 characters, repeated or not printable ASCII (invalid_idempotency_key)',
  401: 'Missing, malformed, unknown or revoked bearer token (unauthorized)',
  403: 'The token lacks the required scope (forbidden; details.required_scope)',
  404: 'No such resource, or another location\'s (not_found)',
  409: 'Conflict or invalid status move (conflict, invalid_transition); on a POST, a request with the same Idempotency-Key still being processed (idempotency_key_in_use: retry later)',
  413: 'Body over 64 KiB (payload_too_large)',
  415: 'Body not JSON, or a Content-Encoding other than gzip, deflate, br (unsupported_media_type)',
  410: 'The answer stored under this Idempotency-Key held a caller\'s personal data that has since been erased (idempotency_answer_erased): it is not replayed and the request does not run again; send a new key',
  422: 'The Idempotency-Key was already used for a different request (idempotency_key_reused): another method, path or body',
  429: 'Per-key rate limit (rate_limited; Retry-After, RateLimit, RateLimit-Policy)',
};

/** The IETF draft rate-limit headers every token-API response carries (docs/rest-api.md "Rate limit"). */
const RATE_LIMIT_HEADERS: Json = {
  'RateLimit-Policy': { description: 'The key\'s budget: `"default";q=<requests>;w=60`', schema: { type: 'string' } },
  RateLimit: { description: 'What is left of it: `"default";r=<remaining>;t=<seconds until the window resets>`', schema: { type: 'string' } },
};

const IDEMPOTENCY_PARAMETER: Json = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'Makes a retry safe: the first request with a key runs and its answer is stored for 24 h (per location); the same request with '
    + 'the same key gets that answer again with `Idempotent-Replayed: true`, a different request 422, a request while the first is still '
    + 'running 409. Errors are not stored (a retry runs again). Any 1–255 printable ASCII characters, e.g. a UUID; a quoted structured-field string is unquoted.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const errorRef = (status: number) => ({ $ref: `#/components/responses/Error${status}` });

/** `/locations/:locationId` → `/locations/{locationId}`. */
const oasPath = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function operationId(spec: RouteSpec): string {
  const words = spec.path.split('/').filter((s) => s && !s.startsWith(':')).flatMap((s) => s.split('-'));
  const base = [spec.method, ...words].map((w, i) => (i === 0 ? w : w[0].toUpperCase() + w.slice(1))).join('');
  return spec.path.endsWith('Id') || /:[a-z]+$/i.test(spec.path) ? `${base}ById` : base;
}

function parameters(spec: RouteSpec): Json[] {
  const out: Json[] = [];
  for (const [where, s] of [['path', spec.params], ['query', spec.query]] as const) {
    if (!s) continue;
    const js = schemaOf(s, 'input');
    const required: string[] = js.required ?? [];
    for (const [name, prop] of Object.entries<Json>(js.properties ?? {})) {
      const { description, ...schema } = prop;
      out.push({ name, in: where, required: where === 'path' || required.includes(name), ...(description ? { description } : {}), schema });
    }
  }
  return out;
}

export function buildOpenApi(routes: RouteSpec[]): Json {
  const paths: Json = {};
  for (const spec of routes) {
    const auth = spec.auth !== false;
    const status = String(spec.status ?? 200);
    const dataSchema = spec.response ? schemaOf(spec.response, 'output') : {};
    const idempotent = auth && spec.method === 'post';
    const headers: Json = {
      ...(spec.list ? { Link: { description: '`<…?cursor=…>; rel="next"` when more rows exist', schema: { type: 'string' } } } : {}),
      ...(auth ? RATE_LIMIT_HEADERS : {}),
      ...(idempotent ? { 'Idempotent-Replayed': { description: '`true` when this is the stored answer of an earlier request with the same Idempotency-Key', schema: { type: 'string', enum: ['true'] } } } : {}),
    };
    const responses: Json = {
      [status]: {
        description: spec.list ? 'A page, newest first; the next page is in the Link header' : 'Success',
        ...(Object.keys(headers).length ? { headers } : {}),
        content: { 'application/json': { schema: { type: 'object', properties: { data: dataSchema }, required: ['data'], additionalProperties: false } } },
      },
    };
    // 403 only where a scope is required, 404 only where the path names something (a location or
    // a record), 409 only where the route says it can conflict: test/rest/contract.test.ts provokes
    // every documented status of every operation.
    const named = /:[A-Za-z]/.test(spec.path);
    const errs = [400, ...(auth ? [401] : []), ...(spec.scope ? [403] : []), ...(named ? [404] : []),
      ...(spec.conflict || idempotent ? [409] : []), ...(spec.body ? [413, 415] : []), ...(idempotent && spec.callerData ? [410] : []), ...(idempotent ? [422] : []), ...(auth ? [429] : [])];
    for (const e of errs) responses[String(e)] = errorRef(e);
    responses.default = { $ref: '#/components/responses/ErrorDefault' };
    const scopeText = spec.scope ? `Requires scope \`${spec.scope}\`.` : auth ? 'Any valid token (no scope).' : 'No authentication.';
    const rules = spec.rules ?? [];
    const rulesText = rules.length
      ? `\n\nAlso enforced (400), not expressible in JSON Schema:\n${rules.map((r) => `- ${RULES[r]}`).join('\n')}`
      : '';
    const op: Json = {
      operationId: operationId(spec),
      summary: spec.summary,
      description: scopeText + rulesText,
      ...(spec.body ? { 'x-rules-not-in-schema': rules } : {}),
      tags: [spec.tag],
      'x-required-scope': spec.scope,
      security: auth ? [{ bearerAuth: [] }] : [],
      parameters: [...parameters(spec), ...(idempotent ? [IDEMPOTENCY_PARAMETER] : [])],
      responses,
    };
    if (spec.body) {
      // A body schema that accepts no body at all (e.g. POST …/test) makes the body optional.
      const required = !spec.body.safeParse(undefined).success;
      op.requestBody = { required, content: { 'application/json': { schema: schemaOf(spec.body, 'input') } } };
    }
    (paths[oasPath(spec.path)] ??= {})[spec.method] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Switchboard API',
      version: '1.0.0',
      description: 'Location-scoped token API of the Switchboard AI receptionist. Also served without the /api/v1 prefix.\n\n'
        + 'Request bodies follow their JSON Schema exactly; rules a schema cannot state are listed in each operation\'s description '
        + '(ids in `x-rules-not-in-schema`). Every body also obeys:\n' + GENERAL_RULES.map((r) => `- ${r}`).join('\n'),
    },
    servers: [{ url: '/api/v1' }],
    security: [{ bearerAuth: [] }],
    tags: [...new Set(routes.map((r) => r.tag))].map((name) => ({ name })),
    paths,
    webhooks: webhooksSection(),
    components: {
      responses: {
        ...Object.fromEntries(Object.entries(ERROR_CODES).map(([status, text]) => [`Error${status}`, errorResponse(text)])),
        ErrorDefault: errorResponse('Any other error (internal_error, unavailable)'),
      },
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'UUIDv4', description: 'An API key token (UUIDv4)' } },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          additionalProperties: false,
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'details'],
              additionalProperties: false,
              properties: {
                code: { type: 'string', examples: ['validation_error', 'forbidden', 'not_found'] },
                message: { type: 'string' },
                details: {
                  type: 'object',
                  description: '{} when empty; validation: { issues: [{ path, message }] }; forbidden: { required_scope }; invalid_transition: { from, to, allowed }',
                  properties: {
                    issues: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } }, required: ['path', 'message'] } },
                    required_scope: { type: 'string' },
                  },
                },
              },
            },
          },
        },
      },
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

/** OpenAPI 3.1 `webhooks`: one POST per event type, its body the catalog's JSON Schema. */
function webhooksSection(): Json {
  return Object.fromEntries(eventCatalog.map((e) => [e.type, {
    post: {
      operationId: `webhook_${e.type.replace('.', '_')}`,
      summary: e.type,
      description: e.description,
      tags: ['Webhook events'],
      parameters: DELIVERY_HEADERS.map(([name, description, extra]) => ({
        name, in: 'header', required: true, description, schema: { type: 'string', ...(extra ?? {}) },
      })),
      requestBody: {
        required: true,
        content: { 'application/json': { schema: eventJsonSchema(e, true), examples: { example: { value: e.example } } } },
      },
      responses: { '2XX': { description: 'Received. Anything else (a redirect included, or no answer within 10 s) is retried.' } },
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
  mountDocsPage(router, '/api/v1');
  return router;
}
