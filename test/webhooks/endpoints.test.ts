import { isPublicAddress } from '../../src/net/ssrf.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { emit } from './support.js';

let t: TestApi;
let locA: { id: string; slug: string };
let locB: { id: string };
let tokenA: string;
let tokenB: string;
let readOnly: string;

beforeAll(async () => {
  // The guard on, as in production.
  t = await startTestApi({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
  locA = await createLocation(t.owner);
  locB = await createLocation(t.owner);
  ({ token: tokenA } = await mintKey(t.owner, locA.id));
  ({ token: tokenB } = await mintKey(t.owner, locB.id));
  ({ token: readOnly } = await mintKey(t.owner, locA.id, ['webhooks:read']));
});
afterAll(() => t.close());

const create = (token: string, loc: string, body: unknown) =>
  request(t.baseUrl, 'POST', `/api/v1/locations/${loc}/webhook-endpoints`, { token, body });

test('SSRF: private, loopback, metadata and names resolving to loopback are refused at registration (400)', async () => {
  for (const url of ['https://127.0.0.1/h', 'https://10.0.0.1/h', 'https://169.254.169.254/latest', 'https://[::1]/h',
    'https://localhost/h', 'https://100.64.0.1/h', 'https://[::ffff:127.0.0.1]/h', 'https://[fd00:ec2::254]/h', 'https://0.0.0.0/h',
    'https://224.0.0.1/h', 'https://192.168.1.1/h']) {
    const res = await create(tokenA, locA.id, { url, events: ['lead.created'] });
    expect([url, res.status, res.body.error?.code]).toEqual([url, 400, 'validation_error']);
    expect(res.body.error.details.issues[0].path).toBe('url');
  }
  expect(isPublicAddress('93.184.215.14')).toBe(true);
  expect(isPublicAddress('2606:4700::1111')).toBe(true);
  expect(isPublicAddress('::ffff:10.0.0.1')).toBe(false);
});

test('create / list / get / patch / delete with secret shown only on create and rotate', async () => {
  const res = await create(tokenA, locA.slug, { url: 'https://93.184.215.14/hooks', events: ['lead.created', 'call.ended'], label: 'CRM' });
  expect(res.status).toBe(201);
  const ep = res.body.data;
  expect(ep).toMatchObject({ location_id: locA.id, label: 'CRM', active: true, failure_count: 0, last_success_at: null });
  expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  const list = await request(t.baseUrl, 'GET', `/api/v1/locations/${locA.id}/webhook-endpoints`, { token: readOnly });
  expect(list.status).toBe(200);
  expect(list.body.data.map((e: { id: string }) => e.id)).toContain(ep.id);
  expect(JSON.stringify(list.body)).not.toContain('whsec_');
  const patched = await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${ep.id}`, { token: tokenA, body: { label: 'CRM 2', events: ['spam.blocked'] } });
  expect(patched.body.data).toMatchObject({ label: 'CRM 2', events: ['spam.blocked'] });
  expect(patched.body.data.secret).toBeUndefined();
  const bad = await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${ep.id}`, { token: tokenA, body: { url: 'https://10.1.2.3/x' } });
  expect(bad.status).toBe(400);
  expect((await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${ep.id}`, { token: tokenA, body: {} })).status).toBe(400);
  expect((await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${ep.id}`, { token: readOnly, body: { active: false } })).status).toBe(403);
  const del = await request(t.baseUrl, 'DELETE', `/api/v1/locations/${locA.id}/webhook-endpoints/${ep.id}`, { token: tokenA });
  expect(del.status).toBe(200);
  expect((await request(t.baseUrl, 'DELETE', `/webhook-endpoints/${ep.id}`, { token: tokenA })).status).toBe(404);
});

test('validation: https only, known event types, non-empty events, no unknown fields', async () => {
  for (const body of [
    { url: 'http://93.184.215.14/h', events: ['lead.created'] },
    { url: 'https://93.184.215.14/h', events: [] },
    { url: 'https://93.184.215.14/h', events: ['lead.exploded'] },
    { url: 'https://93.184.215.14/h', events: ['webhook.test'] },
    { url: 'https://93.184.215.14/h', events: ['lead.created'], secret: 'mine' },
    { events: ['lead.created'] },
  ]) {
    const res = await create(tokenA, locA.id, body);
    expect([body, res.status, res.body.error.code]).toEqual([body, 400, 'validation_error']);
  }
  const q = await request(t.baseUrl, 'GET', `/api/v1/locations/${locA.id}/webhook-deliveries?status=bogus`, { token: tokenA });
  expect(q.status).toBe(400);
});

test('tenancy: another location\'s endpoint or delivery is 404 on every path', async () => {
  const ep = (await create(tokenA, locA.id, { url: 'https://93.184.215.14/h', events: ['lead.created'] })).body.data;
  const eventId = await emit(t.owner, locA.id, 'lead.created', { id: 'l1' });
  const { rows } = await t.owner.query('select id from app.webhook_deliveries where event_id = $1', [eventId]);
  for (const [m, p] of [
    ['GET', `/webhook-endpoints/${ep.id}`], ['PATCH', `/webhook-endpoints/${ep.id}`], ['DELETE', `/webhook-endpoints/${ep.id}`],
    ['POST', `/webhook-endpoints/${ep.id}/test`], ['POST', `/webhook-endpoints/${ep.id}/rotate-secret`],
    ['PATCH', `/locations/${locA.id}/webhook-endpoints/${ep.id}`], ['GET', `/locations/${locA.id}/webhook-deliveries`],
    ['POST', `/locations/${locB.id}/webhook-deliveries/${rows[0].id}/retry`], ['GET', `/webhook-endpoints/not-a-uuid`],
  ]) {
    const res = await request(t.baseUrl, m, `/api/v1${p}`, { token: tokenB, body: m === 'PATCH' ? { active: false } : undefined });
    expect([m, p, res.status]).toEqual([m, p, 404]);
  }
  const mine = await request(t.baseUrl, 'GET', `/api/v1/locations/${locB.id}/webhook-deliveries`, { token: tokenB });
  expect(mine.body.data).toEqual([]);
});

test('deliveries list: newest first, filters, pagination with Link', async () => {
  const ep = (await create(tokenA, locA.id, { url: 'https://93.184.215.14/p', events: ['booking.created'] })).body.data;
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push(await emit(t.owner, locA.id, 'booking.created', { id: `b${i}` }));
  const base = `/api/v1/locations/${locA.id}/webhook-deliveries?endpoint_id=${ep.id}&status=pending`;
  const p1 = await request(t.baseUrl, 'GET', `${base}&limit=2`, { token: readOnly });
  expect(p1.status).toBe(200);
  expect(p1.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([ids[2], ids[1]]);
  expect(p1.body.data[0]).toMatchObject({ endpoint_id: ep.id, event: 'booking.created', attempt: 1, status: 'pending', response_status: null });
  const link = p1.headers.get('link')!;
  const next = /<([^>]+)>/.exec(link)![1];
  const p2 = await request(t.baseUrl, 'GET', next, { token: readOnly });
  expect([next, p2.status, p2.body]).toEqual([next, 200, expect.anything()]);
  expect(p2.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([ids[0]]);
  const byEvent = await request(t.baseUrl, 'GET', `/api/v1/locations/${locA.id}/webhook-deliveries?event_id=${ids[1]}`, { token: readOnly });
  expect(byEvent.body.data).toHaveLength(1);
  // Paused endpoints get no new deliveries.
  await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${ep.id}`, { token: tokenA, body: { active: false } });
  const quiet = await emit(t.owner, locA.id, 'booking.created', { id: 'b9' });
  const none = await request(t.baseUrl, 'GET', `/api/v1/locations/${locA.id}/webhook-deliveries?event_id=${quiet}`, { token: readOnly });
  expect(none.body.data).toEqual([]);
  // A pending delivery cannot be retried by hand.
  const r = await request(t.baseUrl, 'POST', `/api/v1/locations/${locA.id}/webhook-deliveries/${p1.body.data[0].id}/retry`, { token: tokenA });
  expect(r.status).toBe(409);
});
