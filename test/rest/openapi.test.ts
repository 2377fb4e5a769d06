/**
 * The OpenAPI document is generated from the route registry, validates as OpenAPI 3.1, matches the
 * committed client types, and a client generated from it (openapi-fetch) drives the real server.
 */
import { readFileSync } from 'node:fs';
import { validate } from '@readme/openapi-parser';
import createClient from 'openapi-fetch';
import { routes } from '../../src/http/routes/index.js';
import type { paths } from '../generated/api.js';
import { generateTypes } from '../generated/generate.js';
import { createLocation, mintKey, request, startTestApi, type TestApi, type TestLocation } from '../support/harness.js';

let t: TestApi;
let A: TestLocation;
let token: string;

beforeAll(async () => {
  t = await startTestApi();
  A = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, A.id));
});
afterAll(() => t.close());

const oasPath = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

test('GET /api/v1/openapi.json needs no token and is a valid OpenAPI 3.1 document', async () => {
  const res = await request(t.baseUrl, 'GET', '/api/v1/openapi.json');
  expect(res.status).toBe(200);
  expect(res.body.openapi).toBe('3.1.0');
  const result = await validate(structuredClone(res.body));
  if (!result.valid) throw new Error(JSON.stringify(result.errors, null, 2));
  expect(result.valid).toBe(true);
});

test('every registered route is documented with its scope, params, body, responses and security', async () => {
  const doc = (await request(t.baseUrl, 'GET', '/api/v1/openapi.json')).body;
  const ids = new Set<string>();
  for (const r of routes) {
    const op = doc.paths[oasPath(r.path)]?.[r.method];
    expect(op).toBeDefined();
    ids.add(op.operationId);
    expect(op['x-required-scope']).toBe(r.scope);
    if (r.scope) expect(op.description).toContain(r.scope);
    expect(op.security).toEqual(r.auth === false ? [] : [{ bearerAuth: [] }]);
    for (const name of r.path.match(/:([A-Za-z0-9_]+)/g) ?? []) {
      expect(op.parameters).toContainEqual(expect.objectContaining({ name: name.slice(1), in: 'path', required: true }));
    }
    if (r.body) expect(op.requestBody.content['application/json'].schema).toBeDefined();
    expect(op.responses[String(r.status ?? 200)].content['application/json'].schema.properties.data).toBeDefined();
    if (r.scope) expect(op.responses['403']).toEqual({ $ref: '#/components/responses/Error403' });
    else expect(op.responses['403']).toBeUndefined();
  }
  expect(ids.size).toBe(routes.length);
  const leads = doc.paths['/locations/{locationId}/leads'];
  expect(leads.get.parameters).toContainEqual(expect.objectContaining({ name: 'status', in: 'query', schema: expect.objectContaining({ enum: ['new', 'contacted', 'booked', 'closed', 'lost'] }) }));
  expect(leads.post.requestBody.content['application/json'].schema).toMatchObject({ required: ['name', 'phone'], additionalProperties: false });
  const insights = doc.paths['/locations/{locationId}/insights'].get;
  expect(insights.parameters).toContainEqual(expect.objectContaining({ name: 'days', schema: expect.objectContaining({ minimum: 1, maximum: 90 }) }));
  expect(doc.components.schemas.Error.properties.error.required).toEqual(['code', 'message', 'details']);
});

test('GET /api/v1/docs renders an HTML page pointing at the document', async () => {
  const res = await fetch(`${t.baseUrl}/api/v1/docs`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/html');
  expect(await res.text()).toContain('/api/v1/openapi.json');
});

test('the committed client types are what the document generates today', async () => {
  const committed = readFileSync(new URL('../generated/api.d.ts', import.meta.url), 'utf8');
  expect(committed).toBe(await generateTypes());
});

describe('a client generated from the document drives the server', () => {
  const client = () => createClient<paths>({ baseUrl: `${t.baseUrl}/api/v1`, headers: { authorization: `Bearer ${token}` } });
  const locationId = () => A.id;

  test('create and list leads, patch a status', async () => {
    const api = client();
    const made = await api.POST('/locations/{locationId}/leads', {
      params: { path: { locationId: locationId() } },
      body: { name: 'Typed Client', phone: '+15125550123', urgency_level: 2 },
    });
    expect(made.response.status).toBe(201);
    const id = made.data!.data.id;
    const list = await api.GET('/locations/{locationId}/leads', { params: { path: { locationId: locationId() }, query: { status: 'new', limit: 10 } } });
    expect(list.data!.data.map((l) => l.id)).toContain(id);
    const moved = await api.PATCH('/locations/{locationId}/leads/{leadId}', {
      params: { path: { locationId: locationId(), leadId: id } }, body: { status: 'contacted' },
    });
    expect(moved.data!.data.status).toBe('contacted');
    const bad = await api.PATCH('/locations/{locationId}/leads/{leadId}', {
      params: { path: { locationId: locationId(), leadId: id } }, body: { status: 'new' },
    });
    expect(bad.response.status).toBe(409);
    expect((bad.error as any).error.code).toBe('invalid_transition');
  });

  test('FAQs, business hours and insights', async () => {
    const api = client();
    const faq = await api.POST('/locations/{locationId}/faqs', { params: { path: { locationId: locationId() } }, body: { question: 'Q?', answer: 'A.' } });
    expect(faq.data!.data.question).toBe('Q?');
    const hours = await api.PUT('/locations/{locationId}/business-hours', {
      params: { path: { locationId: locationId() } }, body: [{ day: 1, open: '08:00', close: '17:00' }],
    });
    expect(hours.data!.data).toEqual([{ day: 1, open: '08:00', close: '17:00' }]);
    const ins = await api.GET('/locations/{locationId}/insights', { params: { path: { locationId: locationId() }, query: { days: 7 } } });
    expect(ins.data!.data.per_day).toHaveLength(7);
    expect(ins.data!.data.per_hour).toHaveLength(24);
  });
});
