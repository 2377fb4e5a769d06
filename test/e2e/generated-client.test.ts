/**
 * An integrator's first session, through the generated TypeScript client only
 * (clients/typescript: openapi-fetch over the types openapi-typescript generated from the
 * document) against the real service and database: create a lead, list leads with a status
 * filter, move its status, register a webhook endpoint and read its deliveries, read a call with
 * and without the transcripts:read scope, and get the typed error envelope on a 404. No request
 * here is built by hand: a path, parameter or body the document does not declare fails to compile.
 */
import { randomUUID } from 'node:crypto';
import { createSwitchboardClient, type ApiError, type Schemas, type SwitchboardClient } from '../../clients/typescript/index.js';
import { insertCall } from '../rest/fixtures.js';
import { ALL_SCOPES, createLocation, mintKey, startTestApi, type TestApi, type TestLocation } from '../support/harness.js';

let t: TestApi;
let loc: TestLocation;
let api: SwitchboardClient;
let noTranscripts: SwitchboardClient;

beforeAll(async () => {
  t = await startTestApi();
  loc = await createLocation(t.owner, { name: 'Client Heating & Air' });
  const baseUrl = `${t.baseUrl}/api/v1`;
  api = createSwitchboardClient({ baseUrl, token: (await mintKey(t.owner, loc.id)).token });
  noTranscripts = createSwitchboardClient({
    baseUrl, token: (await mintKey(t.owner, loc.id, ALL_SCOPES.filter((s) => s !== 'transcripts:read'), 'no transcripts')).token,
  });
});
afterAll(() => t.close());

const locationId = () => loc.id;

test('leads, webhook deliveries, calls by scope and a typed 404 through the generated client', async () => {
  // A webhook endpoint subscribed to lead.created: the lead below queues a delivery to it.
  const endpoint = await api.POST('/locations/{locationId}/webhook-endpoints', {
    params: { path: { locationId: locationId() } },
    body: { url: 'https://127.0.0.1:9/crm', events: ['lead.created', 'lead.updated'], label: 'CRM' },
  });
  expect(endpoint.response.status).toBe(201);
  const hook: Schemas['WebhookEndpointWithSecret'] = endpoint.data!.data;
  expect(hook.secret).toMatch(/^whsec_/);

  const created = await api.POST('/locations/{locationId}/leads', {
    params: { path: { locationId: locationId() } },
    body: { name: 'Dana Whitfield', phone: '+15125550143', service_type: 'Furnace repair', urgency_level: 3 },
    headers: { 'Idempotency-Key': randomUUID() },
  });
  expect(created.response.status).toBe(201);
  const lead: Schemas['Lead'] = created.data!.data;
  expect(lead).toMatchObject({ status: 'new', phone: '+15125550143', call_id: null });

  const fresh = await api.GET('/locations/{locationId}/leads', { params: { path: { locationId: locationId() }, query: { status: 'new', limit: 10 } } });
  expect(fresh.data!.data.map((l) => l.id)).toContain(lead.id);

  const moved = await api.PATCH('/locations/{locationId}/leads/{leadId}', {
    params: { path: { locationId: locationId(), leadId: lead.id } }, body: { status: 'contacted' },
  });
  expect(moved.data!.data.status).toBe('contacted');
  const contacted = await api.GET('/locations/{locationId}/leads', { params: { path: { locationId: locationId() }, query: { status: 'contacted' } } });
  expect(contacted.data!.data.map((l) => l.id)).toEqual([lead.id]);
  const stillNew = await api.GET('/locations/{locationId}/leads', { params: { path: { locationId: locationId() }, query: { status: 'new' } } });
  expect(stillNew.data!.data.map((l) => l.id)).not.toContain(lead.id);

  const deliveries = await api.GET('/locations/{locationId}/webhook-deliveries', {
    params: { path: { locationId: locationId() }, query: { endpoint_id: hook.id } },
  });
  const attempts: Schemas['WebhookDelivery'][] = deliveries.data!.data;
  expect(attempts.map((d) => d.event).sort()).toEqual(['lead.created', 'lead.updated']);
  expect(attempts.every((d) => d.endpoint_id === hook.id && d.attempt === 1)).toBe(true);

  // The same call read with and without transcripts:read.
  const callId = await insertCall(t.owner, loc.id, {
    outcome: 'booked', transcript: 'Agent: Thanks for calling. Caller: My furnace stopped.',
    transcript_turns: [{ role: 'agent', content: 'Thanks for calling.' }, { role: 'user', content: 'My furnace stopped.' }],
  });
  const full = await api.GET('/locations/{locationId}/calls/{callId}', { params: { path: { locationId: locationId(), callId } } });
  const call: Schemas['Call'] = full.data!.data;
  expect(call.transcript).toContain('furnace');
  expect(call.transcript_turns).toHaveLength(2);
  const redacted = await noTranscripts.GET('/locations/{locationId}/calls/{callId}', { params: { path: { locationId: locationId(), callId } } });
  expect(redacted.response.status).toBe(200);
  expect(redacted.data!.data).toMatchObject({ id: callId, outcome: 'booked', transcript: null, transcript_turns: null });

  // A 404 is the typed error envelope.
  const missing = await api.GET('/locations/{locationId}/leads/{leadId}', { params: { path: { locationId: locationId(), leadId: randomUUID() } } });
  expect(missing.response.status).toBe(404);
  expect(missing.data).toBeUndefined();
  const error: ApiError = missing.error!;
  expect(error.error.code).toBe('not_found');
  expect(error.error.details).toEqual({});

  // A token without leads:read gets the typed 403 naming the scope.
  const forbidden = await createSwitchboardClient({
    baseUrl: `${t.baseUrl}/api/v1`, token: (await mintKey(t.owner, loc.id, ['calls:read'], 'calls only')).token,
  }).GET('/locations/{locationId}/leads', { params: { path: { locationId: locationId() } } });
  expect(forbidden.response.status).toBe(403);
  expect(forbidden.error!.error.details.required_scope).toBe('leads:read');
});
