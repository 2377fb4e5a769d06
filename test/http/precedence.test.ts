/**
 * Client mistakes the happy paths do not exercise: auth outranks validation (401, 404, 403
 * before 400), the outbound-URL check included (it resolves host names), NUL characters and broken percent-encoding are 4xx, never 500.
 */
import { randomUUID } from 'node:crypto';
import { callRow, postVoice, VOICE_SECRET, voiceFixture, voiceLocation } from '../platform/support.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
let a: { id: string; slug: string };
let b: { id: string; slug: string };
let token: string;

beforeAll(async () => {
  // Private targets refused, as in production: the outbound-URL check below must not answer first.
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
  a = await createLocation(t.owner);
  b = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, a.id));
});
afterAll(() => t.close());

const bad = { name: 42, unknown_field: true };

test('an invalid body is judged only after the token, the location and the scope', async () => {
  const unknown = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${a.id}`, { token: randomUUID(), body: bad });
  expect([unknown.status, unknown.body.error.code]).toEqual([401, 'unauthorized']);

  const { token: readOnly } = await mintKey(t.owner, a.id, ['locations:read']);
  const noScope = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${a.id}`, { token: readOnly, body: bad });
  expect([noScope.status, noScope.body.error.code]).toEqual([403, 'forbidden']);
  expect(noScope.body.error.details).toEqual({ required_scope: 'locations:write' });

  const foreign = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${b.slug}`, { token, body: bad });
  expect([foreign.status, foreign.body.error.code]).toEqual([404, 'not_found']);

  const mine = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${a.slug}`, { token, body: bad });
  expect([mine.status, mine.body.error.code]).toEqual([400, 'validation_error']);
});

test('a webhook or integration URL is checked (and its host resolved) only after the token, the location and the scope', async () => {
  const { token: readOnly } = await mintKey(t.owner, a.id, ['webhooks:read', 'integrations:read']);
  const endpoint = (url: string) => ({ url, events: ['lead.created'] });
  const cases: Array<[string, string, string | undefined, unknown, number]> = [
    // Without a valid token nothing is resolved, so nothing is learnt about how a name resolves.
    ['POST', `/api/v1/locations/${a.id}/webhook-endpoints`, randomUUID(), endpoint('https://127.0.0.1/hook'), 401],
    ['POST', `/api/v1/locations/${a.id}/webhook-endpoints`, randomUUID(), endpoint('https://example.invalid/hook'), 401],
    ['PATCH', `/api/v1/webhook-endpoints/${randomUUID()}`, randomUUID(), { url: 'https://127.0.0.1/x' }, 401],
    ['POST', `/api/v1/locations/${b.id}/webhook-endpoints`, token, endpoint('https://127.0.0.1/hook'), 404],
    ['POST', `/api/v1/locations/${b.id}/integrations`, token, { provider: 'zapier', webhook_url: 'https://10.0.0.1/x' }, 404],
    ['POST', `/api/v1/locations/${a.id}/webhook-endpoints`, readOnly, endpoint('https://127.0.0.1/hook'), 403],
    ['POST', `/api/v1/locations/${a.id}/integrations`, readOnly, { provider: 'zapier', webhook_url: 'https://10.0.0.1/x' }, 403],
    // Allowed to register: now the target is judged.
    ['POST', `/api/v1/locations/${a.id}/webhook-endpoints`, token, endpoint('https://127.0.0.1/hook'), 400],
    ['POST', `/api/v1/locations/${a.id}/integrations`, token, { provider: 'zapier', webhook_url: 'https://10.0.0.1/x' }, 400],
  ];
  for (const [method, path, key, body, status] of cases) {
    const res = await request(t.baseUrl, method, path, { token: key, body });
    expect([method, path, res.status]).toEqual([method, path, status]);
  }
  const { rows } = await t.owner.query('select count(*)::int as n from app.webhook_endpoints where location_id = any($1)', [[a.id, b.id]]);
  expect(rows[0].n).toBe(0);
});

test('an unknown provider in the authorize path names nothing: 404, as on the other provider routes', async () => {
  const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${a.id}/integrations/no_such/authorize`, { token });
  expect([res.status, res.body.error.code]).toEqual([404, 'not_found']);
  expect(JSON.stringify(res.body)).not.toContain('no_such');
});

test('the paths outside the token API that answer GET refuse other methods with 405 and Allow, not 404', async () => {
  for (const [method, path, allow] of [['POST', '/api/v1/openapi.json', 'GET, HEAD'], ['DELETE', '/api/v1/docs', 'GET, HEAD'], ['POST', '/healthz', 'GET, HEAD'],
    ['PUT', '/readyz', 'GET, HEAD'], ['POST', '/api/oauth/callback', 'GET'], ['HEAD', '/api/oauth/callback', 'GET']]) {
    const res = await request(t.baseUrl, method, path);
    expect([method, path, res.status, res.headers.get('allow')]).toEqual([method, path, 405, allow]);
    if (method !== 'HEAD') expect(res.body.error?.code).toBe('method_not_allowed');
  }
  for (const path of ['/api/v1/openapi.json', '/api/v1/docs', '/healthz']) expect([path, (await request(t.baseUrl, 'GET', path)).status]).toEqual([path, 200]);
});

test('an unknown time zone is one issue naming the field, whether or not it has the shape of a zone name', async () => {
  for (const timezone of ['GMT', 'Mars/Olympus']) {
    const res = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${a.id}`, { token, body: { timezone } });
    expect([timezone, res.status, res.body.error.details.issues]).toEqual([timezone, 400, [{ path: 'timezone', message: 'Unknown IANA time zone' }]]);
  }
});

test('a malformed id with a bad token is 401, not 404', async () => {
  const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${a.id}/api-keys?limit=0`, { token: randomUUID() });
  expect(res.status).toBe(401);
});

test('NUL characters in a body or a query are 400, and nothing changes', async () => {
  const before = (await t.owner.query('select name, service_areas from app.locations where id = $1', [a.id])).rows[0];
  const body = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${a.id}`, { token, body: { name: 'Nul\u0000Heating' } });
  expect([body.status, body.body.error.code]).toEqual([400, 'validation_error']);
  const arr = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${a.id}`, { token, body: { service_areas: ['Oak\u0000land'] } });
  expect([arr.status, arr.body.error.code]).toEqual([400, 'validation_error']);
  expect((await t.owner.query('select name, service_areas from app.locations where id = $1', [a.id])).rows[0]).toEqual(before);

  const cursor = await request(t.baseUrl, 'GET', `/api/v1/locations/${a.id}/api-keys?cursor=%00`, { token });
  expect([cursor.status, cursor.body.error.code]).toEqual([400, 'validation_error']);
});

test('a path segment that is not valid percent-encoding names nothing: 404, counted against the key with its RateLimit headers; 401 without a token', async () => {
  const res = await request(t.baseUrl, 'GET', '/api/v1/locations/%E0%A4%A/api-keys', { token });
  expect([res.status, res.body.error.code]).toEqual([404, 'not_found']);
  for (const path of [`/api/v1/locations/${a.id}/leads/%zz`, '/api/v1/locations/%zz/leads']) {
    const counted = await request(t.baseUrl, 'GET', path, { token });
    expect([path, counted.status, counted.headers.get('ratelimit-policy')]).toEqual([path, 404, expect.stringMatching(/^"default";q=\d+;w=60$/)]);
    expect(counted.headers.get('ratelimit')).toMatch(/^"default";r=\d+;t=\d+$/);
  }
  const anonymous = await request(t.baseUrl, 'GET', `/api/v1/locations/${a.id}/leads/%zz`);
  expect([anonymous.status, anonymous.body.error.code]).toEqual([401, 'unauthorized']);
});

test('a voice payload carrying NUL characters is still stored (without them)', async () => {
  const loc = await voiceLocation(t.owner);
  const body = voiceFixture('booked', loc);
  body.call.transcript = 'Agent: Hello\u0000 there';
  const res = await postVoice(t.baseUrl, 'post-call', body);
  expect(res.status).toBe(200);
  expect((await callRow(t.owner, loc.id, body.call.call_id)).transcript).toBe('Agent: Hello there');
});
