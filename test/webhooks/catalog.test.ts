/**
 * The event catalog cannot drift: every event body the system writes (each voice outcome fixture,
 * lead create/update, booking create/update, spam block, catalog test sends) validates against
 * the JSON Schema GET /event-types publishes, with a real 2020-12 validator (ajv + ajv-formats).
 * Also: the route itself, the OpenAPI `webhooks` section, and POST …/test { event_type }. The
 * types a resource's own test file proves (test/support/event-catalog.ts) are that file's.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { buildOpenApi } from '../../src/http/openapi.js';
import { routes } from '../../src/http/routes/index.js';
import { open } from '../../src/http/openapi-components.js';
import { closedEventJsonSchema, eventSchemaName, eventTypes, publishedEvents, TEST_EVENT_TYPE } from '../../src/webhooks/events.js';
import finalizeCall from '../../tasks/finalize_call.js';
import { createLocation, mintKey, request, startTestApi, testLog, type TestApi } from '../support/harness.js';
import { claimedEventTypes } from '../support/event-catalog.js';
import { makePki, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
import { callRow, postVoice, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation } from '../platform/support.js';
import { startTestWorker, waitFor } from './support.js';

let t: TestApi;
let pki: TestPki;
let rx: HttpsReceiver;
let loc: VoiceLocation;
let token: string;
let catalog: Array<{ type: string; description: string; schema: Record<string, unknown>; example: any }>;
/** The served schemas (open: a receiver accepts a field added later). */
const validators = new Map<string, ValidateFunction>();
/** The closed ones: the service sends the documented fields and no other. */
const strict = new Map<string, ValidateFunction>();

// ajv-formats is CommonJS: its default export is the module object under NodeNext typing.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv2020) => void;
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv);

/** Every type a receiver can get: the subscribable ones and the test send's. */
const TYPES: string[] = [...eventTypes, TEST_EVENT_TYPE];

beforeAll(async () => {
  pki = makePki();
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  rx = await startHttpsReceiver(pki);
  loc = await voiceLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
  // A token with no webhook scope at all still reads the catalog.
  const { token: narrow } = await mintKey(t.owner, loc.id, ['calls:read']);
  const res = await request(t.baseUrl, 'GET', '/api/v1/event-types', { token: narrow });
  expect(res.status).toBe(200);
  catalog = res.body.data;
  for (const e of catalog) validators.set(e.type, ajv.compile(e.schema));
  for (const e of publishedEvents) strict.set(e.type, ajv.compile({ ...closedEventJsonSchema(e), $id: `closed:${e.type}` }));
});
afterAll(async () => {
  await rx?.close();
  await t?.close();
});

/** The problems of a body against the closed schema of its type (or the served one with `served`). */
function validate(body: any, served = false): string[] {
  const v = (served ? validators : strict).get(body?.event);
  if (!v) return [`no schema for ${body?.event}`];
  return v(body) ? [] : (v.errors ?? []).map((e) => `${body.event} ${e.instancePath} ${e.message}`);
}

test('GET /event-types: every type, each with a description, a 2020-12 JSON Schema of the whole body and an example that validates', async () => {
  expect(catalog.map((e) => e.type)).toEqual(TYPES);
  for (const e of catalog) {
    expect(e.description.length).toBeGreaterThan(20);
    expect(e.schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect((e.schema as any).required).toEqual(['event', 'location_id', 'created_at', 'data']);
    expect((e.schema as any).properties.event.const).toBe(e.type);
    expect(validate(e.example)).toEqual([]);
    expect(validate(e.example, true)).toEqual([]);
    // The schema is not vacuous: a wrong type or a missing field fails; a field added later does
    // not (the served schema is open), though the service sends none (the closed one refuses it).
    expect(validate({ ...e.example, created_at: 'yesterday' }, true)).not.toEqual([]);
    const { [Object.keys(e.example.data)[0]]: _drop, ...missing } = e.example.data;
    expect(validate({ ...e.example, data: missing }, true)).not.toEqual([]);
    expect(validate({ ...e.example, data: { ...e.example.data, surprise: 1 }, later: true }, true)).toEqual([]);
    expect(validate({ ...e.example, data: { ...e.example.data, surprise: 1 } })).not.toEqual([]);
    expect(JSON.stringify(e.schema)).not.toContain('"additionalProperties":false');
  }
  expect((await request(t.baseUrl, 'GET', '/api/v1/event-types')).status).toBe(401);
  expect((await request(t.baseUrl, 'GET', '/event-types', { token })).body.data).toEqual(catalog);
});

test('the OpenAPI document carries the same schemas under `webhooks`', async () => {
  const doc = (await request(t.baseUrl, 'GET', '/api/v1/openapi.json')).body;
  const closed = buildOpenApi(routes, { closed: true });
  expect(Object.keys(doc.webhooks)).toEqual(TYPES);
  for (const e of catalog) {
    const media = doc.webhooks[e.type].post.requestBody.content['application/json'];
    // The document names the body (a component); the catalog publishes it self-contained, its
    // shared records in $defs: the same schema with the references pointing at either place.
    const name = eventSchemaName(e.type);
    expect(media.schema).toEqual({ $ref: `#/components/schemas/${name}` });
    // Compared with the document's closed build, opened: the served one publishes answer and event
    // schemas open and composed (test/rest/openapi.test.ts proves that is the only difference).
    const asDefs = open(JSON.parse(JSON.stringify(closed.components.schemas[name]).replaceAll('#/components/schemas/', '#/$defs/')));
    const { $schema: _s, $defs, title: _t, description: _d, ...root } = e.schema as Record<string, any>;
    expect(asDefs).toEqual(root);
    for (const [def, schema] of Object.entries($defs ?? {})) {
      expect(open(JSON.parse(JSON.stringify(closed.components.schemas[def]).replaceAll('#/components/schemas/', '#/$defs/')))).toEqual(schema);
    }
    // Examples are served by GET /event-types (above), not repeated in the document.
    expect(media.examples).toBeUndefined();
    const param = (p: { name?: string; $ref?: string }) => p.name ?? doc.components.parameters[p.$ref!.split('/').pop()!].name;
    expect(doc.webhooks[e.type].post.parameters.map(param)).toEqual(
      expect.arrayContaining(['svc-signature', 'webhook-id', 'webhook-timestamp', 'webhook-signature']));
  }
  // The test route's body is optional.
  expect(doc.paths['/webhook-endpoints/{id}/test'].post.requestBody.required).toBe(false);
  expect(doc.paths['/webhook-endpoints/{id}/recover'].post.requestBody.required).toBe(true);
});

async function post(route: 'inbound' | 'post-call', body: unknown) {
  const res = await postVoice(t.baseUrl, route, body);
  expect(res.status).toBe(200);
  return res;
}

test('every event body the system emits validates against the published schema', async () => {
  // Voice: every outcome fixture, as the platform sends them.
  await post('inbound', voiceFixture('inbound', loc));
  await t.owner.query(`update app.agent_settings set blocked_numbers = '{+15125550666}' where location_id = $1`, [loc.id]);
  const spam = await post('inbound', voiceFixture('spam-inbound', loc));
  await post('post-call', voiceFixture('spam-blocked-call-ended', loc, { rowId: spam.body.call_inbound.metadata.call_row_id }));
  const started = voiceFixture('call-started', loc);
  await post('post-call', started);
  await post('post-call', voiceFixture('booked', loc, { callId: started.call.call_id }));
  await post('post-call', voiceFixture('dropped', loc));
  await post('post-call', voiceFixture('voicemail', loc));
  const transfer = voiceFixture('emergency-transfer-started', loc);
  await post('post-call', transfer);
  await post('post-call', voiceFixture('emergency-transfer-analyzed', loc, { callId: transfer.call.call_id }));
  await post('post-call', voiceFixture('emergency-transfer-analyzed', loc));
  // No analysis: settled by finalize_call from the disconnection reason.
  const finalize = finalizeCall({ cfg: t.cfg, log: testLog, pool: t.owner });
  for (const reason of [null, 'call_transfer', 'voicemail_reached']) {
    const ended = voiceFixture('analysis-missing-call-ended', loc);
    if (reason) ended.call.disconnection_reason = reason;
    await post('post-call', ended);
    await finalize({ call_id: (await callRow(t.owner, loc.id, ended.call.call_id)).id }, {} as never);
  }

  // Leads and bookings through the API: create (minimal and full), status moves, booking changes.
  const base = `/api/v1/locations/${loc.id}`;
  const minimal = await request(t.baseUrl, 'POST', `${base}/leads`, { token, body: { name: 'Walk In', phone: '+15125550177' } });
  expect(minimal.status).toBe(201);
  const full = await request(t.baseUrl, 'POST', `${base}/leads`, { token, body: {
    name: 'Dee Full', phone: '(512) 555-0188', email: 'dee@example.com', address: '1 Main St', service_type: 'Plumbing',
    urgency_level: 4, estimated_value: 1250.5, notes: 'Water heater leaking',
  } });
  expect(full.status).toBe(201);
  for (const status of ['contacted', 'booked', 'closed']) {
    expect((await request(t.baseUrl, 'PATCH', `${base}/leads/${full.body.data.id}`, { token, body: { status } })).status).toBe(200);
  }
  expect((await request(t.baseUrl, 'PATCH', `${base}/leads/${minimal.body.data.id}`, { token, body: { status: 'lost' } })).status).toBe(200);
  const { rows: [booking] } = await t.owner.query(`select id from app.bookings where location_id = $1 limit 1`, [loc.id]);
  expect(booking).toBeDefined();
  for (const body of [{ status: 'confirmed' }, { scheduled_time: '14:30' }, { scheduled_time: null }, { scheduled_date: '2027-02-03', status: 'cancelled' }]) {
    expect((await request(t.baseUrl, 'PATCH', `${base}/bookings/${booking.id}`, { token, body })).status).toBe(200);
  }

  // An erasure: customer.erased (ids only), and the bodies it rewrites stay valid.
  expect((await request(t.baseUrl, 'POST', `${base}/erasures`, { token, body: { phone: '+15125550177' } })).status).toBe(202);

  const { rows } = await t.owner.query(`select type, body from app.events where location_id = $1 order by created_at, id`, [loc.id]);
  const bodies = rows.map((r) => JSON.parse(r.body));
  const problems = bodies.flatMap((b) => validate(b));
  expect(problems).toEqual([]);
  // Every type, but those another test file emits and validates itself (a claim names a catalog type).
  const claimed = claimedEventTypes();
  for (const [type, file] of claimed) expect([type, file, TYPES.includes(type)]).toEqual([type, file, true]);
  expect([...new Set(bodies.map((b) => b.event))].sort()).toEqual(eventTypes.filter((type) => !claimed.has(type)).sort());
  expect(bodies.length).toBeGreaterThanOrEqual(25);
  // Both emergency reasons and both lead origins were seen.
  expect(new Set(bodies.filter((b) => b.event === 'call.emergency').map((b) => b.data.reason))).toEqual(new Set(['urgency', 'warm_transfer']));
  expect(bodies.some((b) => b.event === 'lead.created' && b.data.call_id === null)).toBe(true);
  expect(bodies.some((b) => b.event === 'lead.created' && b.data.call_id !== null)).toBe(true);
});

test('POST …/test { event_type } sends that type\'s example with svc-test: true; without a body it sends webhook.test', async () => {
  const loc2 = await createLocation(t.owner);
  const { token: tok } = await mintKey(t.owner, loc2.id);
  const ep = (await request(t.baseUrl, 'POST', `/api/v1/locations/${loc2.id}/webhook-endpoints`, { token: tok, body: { url: rx.url, events: ['call.ended'] } })).body.data;
  const worker = await startTestWorker(t.cfg, t.db.url, pki);
  try {
    for (const type of eventTypes) {
      const res = await request(t.baseUrl, 'POST', `/webhook-endpoints/${ep.id}/test`, { token: tok, body: { event_type: type } });
      expect([type, res.status, res.body.data.event, res.body.data.status]).toEqual([type, 202, type, 'pending']);
      const r = await waitFor(async () => rx.received.find((x) => x.headers['svc-delivery-id'] === res.body.data.id), `test ${type}`);
      expect(r.headers['svc-test']).toBe('true');
      expect(r.headers['svc-event']).toBe(type);
      const body = JSON.parse(r.body);
      expect([validate(body), validate(body, true), await inDocument(body)]).toEqual([[], [], []]);
      const example = catalog.find((e) => e.type === type)!.example;
      expect(body.location_id).toBe(loc2.id);
      expect(body.data).toEqual(example.data.location_id ? { ...example.data, location_id: loc2.id } : example.data);
    }
    const plain = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc2.id}/webhook-endpoints/${ep.id}/test`, { token: tok });
    expect([plain.status, plain.body.data.event]).toEqual([202, 'webhook.test']);
    const r = await waitFor(async () => rx.received.find((x) => x.headers['svc-delivery-id'] === plain.body.data.id), 'webhook.test');
    const testBody = JSON.parse(r.body);
    expect(testBody).toMatchObject({ event: 'webhook.test', data: { endpoint_id: ep.id } });
    // The body a receiver gets validates against GET /event-types (served and closed) and the document's webhooks.
    expect([validate(testBody), validate(testBody, true), await inDocument(testBody)]).toEqual([[], [], []]);
    expect(r.headers['svc-test']).toBe('true');
    // No notification and no other endpoint's delivery came from a test send.
    const { rows } = await t.owner.query(
      `select (select count(*) from app.notifications where location_id = $1)::int as n,
              (select count(*) from app.webhook_deliveries where location_id = $1 and endpoint_id <> $2)::int as d`, [loc2.id, ep.id]);
    expect(rows[0]).toEqual({ n: 0, d: 0 });
  } finally {
    await worker.stop();
  }
  for (const body of [{ event_type: 'webhook.test' }, { event_type: 'lead.deleted' }, { event_type: 'lead.created', extra: true }]) {
    const bad = await request(t.baseUrl, 'POST', `/webhook-endpoints/${ep.id}/test`, { token: tok, body });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'validation_error']);
  }
  expect((await request(t.baseUrl, 'POST', `/webhook-endpoints/${ep.id}/test`, { token, body: { event_type: 'lead.created' } })).status).toBe(404);
});

let documentValidators: Map<string, ValidateFunction> | undefined;
/** The problems of a body against the served OpenAPI document's `webhooks` entry for its type. */
async function inDocument(body: any): Promise<string[]> {
  if (!documentValidators) {
    const doc = (await request(t.baseUrl, 'GET', '/api/v1/openapi.json')).body;
    const docAjv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(docAjv);
    docAjv.addSchema({ $id: 'https://switchboard.invalid/openapi.json', components: { schemas: doc.components.schemas } });
    documentValidators = new Map(Object.entries<any>(doc.webhooks).map(([type, item]) => [type,
      docAjv.compile({ $ref: `https://switchboard.invalid/openapi.json${item.post.requestBody.content['application/json'].schema.$ref}` })]));
  }
  const v = documentValidators.get(body?.event);
  if (!v) return [`no webhook for ${body?.event}`];
  return v(body) ? [] : (v.errors ?? []).map((e) => `${body.event} ${e.instancePath} ${e.message}`);
}
