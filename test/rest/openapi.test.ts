/**
 * The OpenAPI document is generated from the route registry, validates as OpenAPI 3.1, names every
 * resource as a component (from the zod schemas), gives every operation its stable conventional
 * operationId and scope, is small, and matches the committed client (clients/typescript).
 */
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import express from 'express';
import { validate } from '@readme/openapi-parser';
import { z } from 'zod';
import { buildOpenApi, lintRoutes } from '../../src/http/openapi.js';
import { defineRoute, deprecationHeaders, mountRoutes, type RouteSpec } from '../../src/http/route.js';
import { routes } from '../../src/http/routes/index.js';
import { eventSchemaName } from '../../src/webhooks/events.js';
import { clientTypes, documentText } from '../../scripts/generate-client.js';
import { request, startTestApi, type TestApi } from '../support/harness.js';

type Json = Record<string, any>;
let t: TestApi;
let doc: Json;

beforeAll(async () => {
  t = await startTestApi();
  doc = (await request(t.baseUrl, 'GET', '/api/v1/openapi.json')).body;
});
afterAll(() => t.close());

const oasPath = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/**
 * Every operation's SDK method name. A change here is a breaking change for generated clients:
 * docs/api-contract.md "Compatibility and deprecation" (and test/rest/compat.test.ts) say how.
 * An operation added since is not listed: lintRoutes checks its name, the committed client pins
 * it, and it joins this table with the release that ships it.
 */
const OPERATION_IDS: Record<string, string> = {
  'GET /me': 'getMe',
  'GET /locations': 'listLocations',
  'GET /locations/{locationId}': 'getLocation',
  'PATCH /locations/{locationId}': 'updateLocation',
  'GET /locations/{locationId}/api-keys': 'listApiKeys',
  'GET /locations/{locationId}/calls': 'listCalls',
  'GET /locations/{locationId}/calls/{callId}': 'getCall',
  'GET /locations/{locationId}/leads': 'listLeads',
  'POST /locations/{locationId}/leads': 'createLead',
  'GET /locations/{locationId}/leads/{leadId}': 'getLead',
  'PATCH /locations/{locationId}/leads/{leadId}': 'updateLead',
  'GET /locations/{locationId}/bookings': 'listBookings',
  'POST /locations/{locationId}/integrations/{provider}/authorize': 'authorizeIntegration',
  'PUT /locations/{locationId}/integrations/servicetitan/credentials': 'connectServiceTitan',
  'GET /locations/{locationId}/integrations/{provider}/syncs': 'listIntegrationSyncs',
  'POST /locations/{locationId}/integrations/{provider}/syncs/{syncId}/retry': 'retryIntegrationSync',
  'POST /locations/{locationId}/bookings': 'createBooking',
  'GET /locations/{locationId}/scheduling': 'getScheduling',
  'PATCH /locations/{locationId}/scheduling': 'updateScheduling',
  'GET /locations/{locationId}/availability': 'listAvailability',
  'GET /locations/{locationId}/bookings/{bookingId}': 'getBooking',
  'PATCH /locations/{locationId}/bookings/{bookingId}': 'updateBooking',
  'GET /locations/{locationId}/faqs': 'listFaqs',
  'POST /locations/{locationId}/faqs': 'createFaq',
  'GET /locations/{locationId}/faqs/{faqId}': 'getFaq',
  'PATCH /locations/{locationId}/faqs/{faqId}': 'updateFaq',
  'DELETE /locations/{locationId}/faqs/{faqId}': 'deleteFaq',
  'GET /locations/{locationId}/pricebook': 'listPricebookItems',
  'POST /locations/{locationId}/pricebook': 'createPricebookItem',
  'GET /locations/{locationId}/pricebook/{itemId}': 'getPricebookItem',
  'PATCH /locations/{locationId}/pricebook/{itemId}': 'updatePricebookItem',
  'DELETE /locations/{locationId}/pricebook/{itemId}': 'deletePricebookItem',
  'GET /locations/{locationId}/call-forwarding': 'getCallForwarding',
  'PATCH /locations/{locationId}/call-forwarding': 'updateCallForwarding',
  'GET /locations/{locationId}/business-hours': 'getBusinessHours',
  'PUT /locations/{locationId}/business-hours': 'replaceBusinessHours',
  'GET /locations/{locationId}/agent': 'getAgentSettings',
  'PATCH /locations/{locationId}/agent': 'updateAgentSettings',
  'GET /locations/{locationId}/integrations': 'listIntegrations',
  'POST /locations/{locationId}/integrations': 'createIntegration',
  'DELETE /locations/{locationId}/integrations/{provider}': 'deleteIntegration',
  'GET /locations/{locationId}/members': 'listMembers',
  'GET /locations/{locationId}/insights': 'getInsights',
  'POST /locations/{locationId}/webhook-endpoints': 'createWebhookEndpoint',
  'GET /locations/{locationId}/webhook-endpoints': 'listWebhookEndpoints',
  'GET /webhook-endpoints/{id}': 'getWebhookEndpointForKey',
  'GET /locations/{locationId}/webhook-endpoints/{id}': 'getWebhookEndpoint',
  'PATCH /webhook-endpoints/{id}': 'updateWebhookEndpointForKey',
  'PATCH /locations/{locationId}/webhook-endpoints/{id}': 'updateWebhookEndpoint',
  'DELETE /webhook-endpoints/{id}': 'deleteWebhookEndpointForKey',
  'DELETE /locations/{locationId}/webhook-endpoints/{id}': 'deleteWebhookEndpoint',
  'POST /webhook-endpoints/{id}/test': 'testWebhookEndpointForKey',
  'POST /locations/{locationId}/webhook-endpoints/{id}/test': 'testWebhookEndpoint',
  'POST /webhook-endpoints/{id}/recover': 'recoverWebhookEndpointForKey',
  'POST /locations/{locationId}/webhook-endpoints/{id}/recover': 'recoverWebhookEndpoint',
  'POST /webhook-endpoints/{id}/rotate-secret': 'rotateWebhookEndpointSecretForKey',
  'POST /locations/{locationId}/webhook-endpoints/{id}/rotate-secret': 'rotateWebhookEndpointSecret',
  'GET /locations/{locationId}/webhook-deliveries': 'listWebhookDeliveries',
  'POST /locations/{locationId}/webhook-deliveries/{id}/retry': 'retryWebhookDelivery',
  'GET /event-types': 'listEventTypes',
  'GET /locations/{locationId}/notification-settings': 'getNotificationSettings',
  'PATCH /locations/{locationId}/notification-settings': 'updateNotificationSettings',
  'GET /locations/{locationId}/notifications': 'listNotifications',
  'GET /locations/{locationId}/data-retention': 'getDataRetention',
  'PATCH /locations/{locationId}/data-retention': 'updateDataRetention',
  'POST /locations/{locationId}/erasures': 'createErasure',
  'GET /locations/{locationId}/erasures': 'listErasures',
  'GET /locations/{locationId}/erasures/{erasureId}': 'getErasure',
  'GET /locations/{locationId}/caller-data': 'getCallerData',
  'POST /voice/inbound': 'receiveInboundCall',
  'POST /voice/post-call': 'receivePostCallEvent',
  'POST /voice/tools/check_availability': 'callToolCheckAvailability',
  'POST /voice/tools/book_appointment': 'callToolBookAppointment',
  'POST /voice/tools/find_appointments': 'callToolFindAppointments',
  'POST /voice/tools/reschedule_appointment': 'callToolRescheduleAppointment',
  'POST /voice/tools/cancel_appointment': 'callToolCancelAppointment',
  'POST /voice/tools/transfer_target': 'callToolTransferTarget',
};

/**
 * The served document under this size (bytes of GET /api/v1/openapi.json as sent, JSON without
 * indentation, no compression): the target, 150 KB (docs/api-contract.md §5, "Size").
 */
const SIZE_BUDGET = 150_000;

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const operationsOf = (d: Json) => Object.entries<Json>(d.paths).flatMap(([p, item]) =>
  METHODS.filter((m) => item[m]).map((m) => ({ key: `${m.toUpperCase()} ${p}`, op: item[m] as Json, item })));

test('GET /api/v1/openapi.json needs no token and is a valid OpenAPI 3.1 document', async () => {
  const res = await request(t.baseUrl, 'GET', '/api/v1/openapi.json');
  expect(res.status).toBe(200);
  expect(res.body.openapi).toBe('3.1.0');
  const result = await validate(structuredClone(res.body));
  if (!result.valid) throw new Error(JSON.stringify(result.errors, null, 2));
  expect(result.valid).toBe(true);
  expect(res.body.info).toMatchObject({ license: { name: expect.any(String) }, contact: { email: expect.any(String) } });
  for (const tag of res.body.tags) expect(tag.description).toEqual(expect.any(String));
});

test('every route names its operationId, a described tag, and named body and response schemas', () => {
  expect(lintRoutes(routes)).toEqual([]);
  // The check itself: a route missing them is reported by name.
  const bare = defineRoute({
    method: 'get', path: '/locations/:locationId/widgets', tag: 'Widgets', scope: 'widgets:read', summary: 'Widgets',
    response: z.object({ id: z.string() }), handler: async () => null,
  });
  expect(lintRoutes([bare])).toEqual([
    'GET /locations/:locationId/widgets: no operationId',
    'GET /locations/:locationId/widgets: tag Widgets has no description in its route module\'s area (src/http/route.ts defineArea)',
    'GET /locations/:locationId/widgets: response schema has no .meta({ id })',
  ]);
});

test('operationIds are the conventional, stable names and unique', () => {
  const served = Object.fromEntries(operationsOf(doc).map(({ key, op }) => [key, op.operationId]));
  // Every listed operation is served under its name; newer ones follow the verb convention.
  expect(Object.fromEntries(Object.keys(OPERATION_IDS).map((k) => [k, served[k]]))).toEqual(OPERATION_IDS);
  const VERBS: Record<string, RegExp> = { GET: /^(get|list)[A-Z]/, POST: /^[a-z]+[A-Z]/, PUT: /^(replace|connect|set)[A-Z]/, PATCH: /^update[A-Z]/, DELETE: /^delete[A-Z]/ };
  for (const [key, id] of Object.entries(served).filter(([k]) => !(k in OPERATION_IDS))) {
    expect([key, id]).toEqual([key, expect.stringMatching(VERBS[key.split(' ')[0]])]);
  }
  const webhookIds = Object.values<Json>(doc.webhooks).map((w) => w.post.operationId);
  const all = [...Object.values(served), ...webhookIds];
  expect(new Set(all).size).toBe(all.length);
  expect(webhookIds).toContain('onLeadCreated');
});

test('every resource is a named component referenced with $ref, envelopes and pages included', () => {
  const schemas = doc.components.schemas;
  for (const name of ['Location', 'ApiKey', 'Me', 'CallSummary', 'Call', 'TranscriptTurn', 'Lead', 'LeadCreate', 'LeadUpdate', 'Booking',
    'Customer', 'Faq', 'PricebookItem', 'CallForwarding', 'BusinessHours', 'BusinessHoursInterval', 'AgentSettings', 'Integration', 'Member',
    'WebhookEndpoint', 'WebhookEndpointWithSecret', 'WebhookDelivery', 'EventType', 'Notification', 'NotificationSettings', 'InsightsSummary',
    'DataRetention', 'Erasure', 'ErasureSummary', 'CallerData', 'Error', 'ValidationIssue', 'Timestamp', 'Uuid',
    'LeadPage', 'LeadResponse', 'CallSummaryPage', 'WebhookDeliveryPage', 'VoiceCall', 'VoiceInboundWebhook', 'VoicePostCallWebhook']) {
    expect([name, schemas[name] !== undefined]).toEqual([name, true]);
  }
  expect(schemas.LeadPage.properties.data).toEqual({ type: 'array', items: { $ref: '#/components/schemas/Lead' } });
  expect(schemas.Call.properties.transcript_turns.anyOf[0].items).toEqual({ $ref: '#/components/schemas/TranscriptTurn' });
  expect(schemas.Call.allOf).toEqual([{ $ref: '#/components/schemas/CallSummary' }]);
  expect(doc.components.parameters).toMatchObject({ Limit: { in: 'query' }, Cursor: { in: 'query' }, LocationId: { in: 'path' } });
  for (const { key, op } of operationsOf(doc)) {
    const ok = Object.entries<Json>(op.responses).find(([s]) => s.startsWith('2'))![1];
    const success = ok.$ref ? doc.components.responses[ok.$ref.split('/').pop()] : ok;
    expect([key, success.content['application/json'].schema.$ref]).toEqual([key, expect.stringMatching(/^#\/components\/schemas\//)]);
    if (op.requestBody) expect([key, op.requestBody.content['application/json'].schema.$ref]).toEqual([key, expect.stringMatching(/^#\/components\/schemas\//)]);
  }
  // The webhooks section: one named event body per type, built on the same records as the REST responses.
  for (const [type, item] of Object.entries<Json>(doc.webhooks)) {
    expect(item.post.requestBody.content['application/json'].schema).toEqual({ $ref: `#/components/schemas/${eventSchemaName(type)}` });
  }
  expect(schemas.LeadCreatedEvent.properties.data).toEqual({ $ref: '#/components/schemas/Lead' });
  expect(schemas.CallEndedEvent.properties.data).toEqual({ $ref: '#/components/schemas/CallSummary' });
  // The voice platform's routes: under /api, signed, with named bodies.
  expect(doc.paths['/voice/post-call'].servers).toEqual([expect.objectContaining({ url: '/api' })]);
  expect(doc.paths['/voice/post-call'].post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/VoicePostCallWebhook' });
  expect(schemas.VoicePostCallWebhook.properties.call).toEqual({ $ref: '#/components/schemas/VoiceCall' });
});

test('every registered route is documented with its scope in the security requirement, params, body and responses', () => {
  for (const r of routes) {
    const item = doc.paths[oasPath(r.path)];
    const op = item?.[r.method];
    expect(op).toBeDefined();
    // Path parameters shared by every operation of a path are declared once, on the path item.
    const params = [...(item.parameters ?? []), ...(op.parameters ?? [])];
    expect(op.security).toEqual(r.auth === false ? [] : [{ bearerAuth: r.scope ? [r.scope] : [] }]);
    if (r.scope) expect(op.description).toContain(r.scope);
    for (const name of r.path.match(/:([A-Za-z0-9_]+)/g) ?? []) {
      const p = name.slice(1);
      expect(params).toContainEqual(p === 'locationId'
        ? { $ref: '#/components/parameters/LocationId' }
        : expect.objectContaining({ name: p, in: 'path', required: true }));
    }
    // Errors: the shared 4XX and default responses, the operation's own statuses listed.
    expect(op.responses).toMatchObject({ '4XX': { $ref: '#/components/responses/Error4XX' }, default: { $ref: '#/components/responses/ErrorDefault' } });
    expect(Object.keys(op.responses).filter((s) => /^[45]/.test(s))).toEqual(['4XX']);
    expect(op['x-error-statuses'].includes(403)).toBe(Boolean(r.scope));
    expect(op['x-error-statuses'].includes(401)).toBe(r.auth !== false);
  }
  const leads = doc.paths['/locations/{locationId}/leads'];
  expect(leads.get.parameters).toContainEqual(expect.objectContaining({ name: 'status', in: 'query', schema: expect.objectContaining({ enum: ['new', 'contacted', 'booked', 'closed', 'lost'] }) }));
  expect(doc.components.schemas.LeadCreate).toMatchObject({ required: ['name', 'phone'], additionalProperties: false });
  expect(doc.components.schemas.Error.properties.error.required).toEqual(['code', 'message', 'details']);
  expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
});

/** `schema` without `additionalProperties: false` at any depth. */
const opened = (node: unknown): any => (Array.isArray(node) ? node.map(opened) : node && typeof node === 'object'
  ? Object.fromEntries(Object.entries(node).filter(([k, v]) => !(k === 'additionalProperties' && v === false)).map(([k, v]) => [k, opened(v)]))
  : node);

test('the served document is its closed build with the answer schemas open and composed, nothing else', () => {
  const closed = buildOpenApi(routes, { closed: true });
  const schemas: Json = doc.components.schemas;
  // A composed schema flattened: its base's fields, then its own.
  const flat = (name: string): Json => {
    const s = schemas[name];
    if (!s.allOf) return s;
    const base = flat(s.allOf[0].$ref.split('/').pop());
    const { allOf: _a, properties, required = [], ...rest } = s;
    return { ...rest, properties: { ...base.properties, ...properties }, required: [...base.required, ...required] };
  };
  expect(Object.keys(schemas)).toEqual(Object.keys(closed.components.schemas));
  for (const [name, strict] of Object.entries<Json>(closed.components.schemas)) {
    const same = isDeepStrictEqual(flat(name), strict) || isDeepStrictEqual(flat(name), opened(strict));
    expect([name, same]).toEqual([name, true]);
  }
  expect({ ...doc, components: { ...doc.components, schemas: null } }).toEqual({ ...closed, components: { ...closed.components, schemas: null } });
  // Records that extend another are composed; answers are open, request bodies closed.
  for (const [derived, base] of [['Call', 'CallSummary'], ['CallEmergencyData', 'CallSummary'], ['LeadUpdatedData', 'Lead'],
    ['BookingUpdatedData', 'Booking'], ['WebhookEndpointWithSecret', 'WebhookEndpoint'], ['Erasure', 'ErasureSummary']]) {
    expect([derived, schemas[derived].allOf]).toEqual([derived, [{ $ref: `#/components/schemas/${base}` }]]);
  }
  expect(schemas.Lead.additionalProperties).toBeUndefined();
  expect(closed.components.schemas.Lead.additionalProperties).toBe(false);
  expect(schemas.LeadCreate.additionalProperties).toBe(false);
});

test(`the served document is under ${SIZE_BUDGET / 1000} kB`, async () => {
  const res = await fetch(`${t.baseUrl}/api/v1/openapi.json`);
  const bytes = (await res.arrayBuffer()).byteLength;
  expect(bytes).toBeLessThan(SIZE_BUDGET);
});

// Before the client comparison: generating the client takes seconds, and the test server may
// close the idle keep-alive connection fetch would reuse.
test('GET /api/v1/docs renders an HTML page pointing at the document', async () => {
  const res = await fetch(`${t.baseUrl}/api/v1/docs`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/html');
  expect(await res.text()).toContain('/api/v1/openapi.json');
});

test('the committed client (clients/typescript) is what the document generates today', async () => {
  const dir = new URL('../../clients/typescript/', import.meta.url);
  expect(readFileSync(new URL('openapi.json', dir), 'utf8')).toBe(documentText());
  expect(readFileSync(new URL('schema.d.ts', dir), 'utf8')).toBe(await clientTypes());
  expect(JSON.parse(documentText())).toEqual(doc);
});

describe('a deprecated operation', () => {
  const spec: RouteSpec = defineRoute({
    operationId: 'getWidget', method: 'get', path: '/widgets', tag: 'Me', scope: null, auth: false, summary: 'A widget',
    response: z.object({ ok: z.boolean() }).meta({ id: 'WidgetForDeprecationTest' }),
    deprecated: { since: '2026-06-01', sunset: '2026-12-01' },
    handler: async () => ({ ok: true }),
  });

  test('is marked deprecated: true in the document, with its headers', () => {
    const op = buildOpenApi([spec]).paths['/widgets'].get;
    expect(op.deprecated).toBe(true);
    expect(op.description).toContain('2026-12-01');
    expect(Object.keys(op.responses['200'].headers)).toEqual(expect.arrayContaining(['Deprecation', 'Sunset']));
  });

  test('answers with Deprecation (RFC 9745) and Sunset (RFC 8594) headers', async () => {
    expect(deprecationHeaders(spec.deprecated!)).toEqual({ Deprecation: '@1780272000', Sunset: 'Tue, 01 Dec 2026 00:00:00 GMT' });
    const app = express();
    const router = express.Router();
    mountRoutes(router, [spec], {} as never, {} as never);
    app.use(router);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/widgets`);
      expect(res.status).toBe(200);
      expect(res.headers.get('deprecation')).toBe('@1780272000');
      expect(res.headers.get('sunset')).toBe('Tue, 01 Dec 2026 00:00:00 GMT');
    } finally {
      server.close();
    }
  });
});
