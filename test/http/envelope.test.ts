import { createLocation, mintKey, request, roomInMinute, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
let token: string;
let loc: { id: string };

beforeAll(async () => {
  t = await startTestApi({ RATE_LIMIT_PER_MINUTE: '5' });
  loc = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
});
afterAll(() => t.close());

const envelope = (code: string) => ({ error: { code, message: expect.any(String), details: expect.any(Object) } });

test('unknown route → 404 JSON envelope, under both prefixes and outside them', async () => {
  for (const path of ['/api/v1/nope', '/nope', '/api/v1/locations/x/unknown-thing']) {
    const res = await request(t.baseUrl, 'GET', path, { token });
    expect(res.status).toBe(404);
    expect(res.body).toEqual(envelope('not_found'));
  }
});

test('known path, wrong method → 405 with Allow', async () => {
  const res = await request(t.baseUrl, 'DELETE', '/api/v1/me', { token });
  expect(res.status).toBe(405);
  expect(res.body).toEqual(envelope('method_not_allowed'));
  expect(res.headers.get('allow')).toContain('GET');
});

test('malformed JSON → 400 invalid_json', async () => {
  const res = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}`, {
    token, raw: '{"name": ', headers: { 'content-type': 'application/json' },
  });
  expect(res.status).toBe(400);
  expect(res.body).toEqual(envelope('invalid_json'));
});

test('non-JSON body → 415', async () => {
  const res = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}`, {
    token, raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  expect(res.status).toBe(415);
  expect(res.body).toEqual(envelope('unsupported_media_type'));
});

test('body over 64 KiB → 413, nothing changed', async () => {
  const res = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}`, {
    token, body: { name: 'x'.repeat(70 * 1024) },
  });
  expect(res.status).toBe(413);
  expect(res.body).toEqual(envelope('payload_too_large'));
  const { rows } = await t.owner.query('select name from app.locations where id = $1', [loc.id]);
  expect(rows[0].name).not.toMatch(/^x+$/);
});

test('healthz and readyz answer without auth', async () => {
  expect((await request(t.baseUrl, 'GET', '/healthz')).status).toBe(200);
  const ready = await request(t.baseUrl, 'GET', '/readyz');
  expect(ready.status).toBe(200);
  expect(ready.body.data.status).toBe('ready');
});

test('every response carries a request id', async () => {
  const res = await request(t.baseUrl, 'GET', '/healthz');
  expect(res.headers.get('x-request-id')).toMatch(/.+/);
});

test('rate limit per key → 429 with Retry-After (limit 5/min here)', async () => {
  const { token: limited } = await mintKey(t.owner, loc.id);
  await roomInMinute(10);
  const statuses: number[] = [];
  for (let i = 0; i < 7; i++) statuses.push((await request(t.baseUrl, 'GET', '/api/v1/me', { token: limited })).status);
  expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
  const res = await request(t.baseUrl, 'GET', '/api/v1/me', { token: limited });
  expect(res.status).toBe(429);
  expect(res.body).toEqual(envelope('rate_limited'));
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
});
