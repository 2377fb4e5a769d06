/**
 * The access log: one `request completed` line per response with the request id the client saw,
 * method, URL and status (never the Authorization header). List and single-object responses are
 * the `{ data }` envelope around the JSON SQL wrote.
 */
import { createLocation, memoryLog, mintKey, useTestApi } from '../support/harness.js';

const { log, records } = memoryLog('info');
const t = useTestApi({}, { log });

const completed = (id: string) => records().filter((l) => l.msg === 'request completed' && l.req?.id === id);

test('one access line per request, with the id of the x-request-id header, status and URL; no token', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const res = await fetch(`${t.baseUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}`, 'x-request-id': 'req-abc.1' } });
  expect(res.status).toBe(200);
  expect(res.headers.get('x-request-id')).toBe('req-abc.1');
  const body = (await res.json()) as any;
  expect(Object.keys(body)).toEqual(['data']);
  expect(body.data.location.id).toBe(loc.id);

  const missing = await fetch(`${t.baseUrl}/api/v1/nope`);
  const id = missing.headers.get('x-request-id')!;
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  await missing.text();

  await new Promise((r) => setTimeout(r, 50));
  expect(completed('req-abc.1')).toEqual([
    expect.objectContaining({ level: 30, req: { id: 'req-abc.1', method: 'GET', url: '/api/v1/me' }, res: { statusCode: 200 }, responseTime: expect.any(Number) }),
  ]);
  expect(completed(id)).toEqual([expect.objectContaining({ req: { id, method: 'GET', url: '/api/v1/nope' }, res: { statusCode: 404 } })]);
  expect(JSON.stringify(records())).not.toContain(token);
});

test('a list page is exactly { data: [...] } with the next page in Link', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`${t.baseUrl}/api/v1/locations/${loc.id}/faqs`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ question: `Q${i}?`, answer: `A${i}` }),
    });
    expect(r.status).toBe(201);
  }
  const res = await fetch(`${t.baseUrl}/api/v1/locations/${loc.id}/faqs?limit=2`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  const body = (await res.json()) as any;
  expect(Object.keys(body)).toEqual(['data']);
  expect(body.data.map((f: { question: string }) => f.question)).toEqual(['Q2?', 'Q1?']);
  const next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')![1];
  const second = (await (await fetch(`${t.baseUrl}${next}`, { headers: { authorization: `Bearer ${token}` } })).json()) as any;
  expect(second.data.map((f: { question: string }) => f.question)).toEqual(['Q0?']);
});

test('query values never reach the access line: names only (a phone in ?phone= or as a bare name is left out)', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const res = await fetch(`${t.baseUrl}/api/v1/locations/${loc.id}/calls?outcome=booked&limit=5&phone=%2B15125550143&%2B15125550143`, {
    headers: { authorization: `Bearer ${token}`, 'x-request-id': 'req-query.1' },
  });
  await res.text();
  await new Promise((r) => setTimeout(r, 50));
  expect(completed('req-query.1')).toEqual([expect.objectContaining({
    req: { id: 'req-query.1', method: 'GET', url: `/api/v1/locations/${loc.id}/calls?outcome=[redacted]&limit=[redacted]&phone=[redacted]` },
  })]);
  expect(JSON.stringify(records())).not.toMatch(/5125550143|booked/);
});

test('matrix parameters in a path segment are logged as names only, like a query (a phone after ";" never reaches the access line)', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const res = await fetch(`${t.baseUrl}/api/v1/locations/${loc.id}/caller-data;phone=%2B15125550143;x=1/more;%2B15125550143?email=a%40b.example`, {
    headers: { authorization: `Bearer ${token}`, 'x-request-id': 'req-matrix.1' },
  });
  await res.text();
  await new Promise((r) => setTimeout(r, 50));
  expect(completed('req-matrix.1')).toEqual([expect.objectContaining({
    req: { id: 'req-matrix.1', method: 'GET', url: `/api/v1/locations/${loc.id}/caller-data;phone=[redacted];x=[redacted]/more?email=[redacted]` },
  })]);
  expect(JSON.stringify(records())).not.toMatch(/5125550143|a%40b|a@b/);
});
