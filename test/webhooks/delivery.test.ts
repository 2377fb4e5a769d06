import { createHmac } from 'node:crypto';
import { loadConfig } from '../../src/config.js';
import { request } from '../support/harness.js';
import { reply } from '../support/https.js';
import { attemptsUntil, createEndpoint, deliveriesOf, emit, sleep, startTestWorker, useWebhookRig, waitFor } from './support.js';

const DELAYS = '0,0,0,0,0';
const t = useWebhookRig({ WEBHOOK_RETRY_DELAYS: DELAYS, WEBHOOK_TIMEOUT_MS: '1500' }, { tenant: true, resetEach: true });

const endpoint = (events = ['lead.created'], url = t.rx.url) => createEndpoint(t, t.token, t.loc.id, { url, events, label: 'crm' });

const lead = { id: '7d6f1c1e-7b0a-4b59-9f7e-000000000001', name: 'Ana Díaz', phone: '+15551234567', status: 'new' };

test('a delivery carries the exact headers and a signature that verifies over the raw bytes', async () => {
  const ep = await endpoint();
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const [d] = await waitFor(async () => {
    const rows = await deliveriesOf(t.owner, eventId);
    return rows[0]?.status === 'delivered' && rows;
  }, 'delivered');
  const r = t.rx.received.find((x) => x.headers['svc-event-id'] === eventId)!;
  expect(r.headers['content-type']).toBe('application/json');
  expect(r.headers['user-agent']).toBe('Service-Webhooks/1.0');
  expect(r.headers['svc-event']).toBe('lead.created');
  expect(r.headers['svc-delivery-id']).toBe(d.id);
  expect(r.headers['svc-timestamp']).toMatch(/^\d{10}$/);
  const expected = createHmac('sha256', ep.secret).update(r.raw).digest('hex');
  expect(r.headers['svc-signature']).toBe(`v1=${expected}`);
  const body = JSON.parse(r.raw.toString('utf8'));
  expect(body).toEqual({ event: 'lead.created', location_id: t.loc.id, created_at: expect.stringMatching(/Z$/), data: lead });
  expect(Object.keys(body).sort()).toEqual(['created_at', 'data', 'event', 'location_id']);
  expect(d.response_status).toBe(200);
  expect(d.response_body).toBe('ok');
  expect(d.duration_ms).toEqual(expect.any(Number));
  // An unsubscribed type creates nothing for this endpoint.
  const other = await emit(t.owner, t.loc.id, 'booking.created', { id: 'x' });
  expect((await deliveriesOf(t.owner, other)).filter((x) => x.endpoint_id === ep.id)).toEqual([]);
  await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
});

test('500, 503, then 200 → three attempts, same event id, three delivery ids, failure_count back to 0', async () => {
  t.rx.respond(reply(500, 'boom'), reply(503, 'busy'), reply(200, 'fine'));
  const ep = await endpoint();
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const rows = await attemptsUntil(t.owner, eventId, 'delivered', 'third attempt delivered');
  expect(rows.map((r) => [r.attempt, r.status, r.response_status])).toEqual([[1, 'failed', 500], [2, 'failed', 503], [3, 'delivered', 200]]);
  expect(new Set(rows.map((r) => r.id)).size).toBe(3);
  const mine = t.rx.received.filter((x) => x.headers['svc-event-id'] === eventId);
  expect(mine.map((x) => x.headers['svc-delivery-id'])).toEqual(rows.map((r) => r.id));
  expect(new Set(mine.map((x) => x.raw.toString('hex'))).size).toBe(1);
  const list = await request(t.baseUrl, 'GET', `/api/v1/locations/${t.loc.id}/webhook-deliveries?event_id=${eventId}`, { token: t.token });
  expect(list.body.data.map((d: { attempt: number }) => d.attempt)).toEqual([3, 2, 1]);
  expect(list.body.data[2].next_attempt_at).not.toBeNull();
  const got = await request(t.baseUrl, 'GET', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
  expect(got.body.data.failure_count).toBe(0);
  expect(got.body.data.last_success_at).not.toBeNull();
  await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
});

test('six failures → dead, no seventh; manual retry re-sends as a new attempt', async () => {
  t.rx.respond(reply(500, 'down'));
  const ep = await endpoint();
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const rows = await attemptsUntil(t.owner, eventId, 'dead', 'dead');
  await sleep(600);
  const after = await deliveriesOf(t.owner, eventId);
  expect(after.map((r) => r.status)).toEqual(['failed', 'failed', 'failed', 'failed', 'failed', 'dead']);
  expect(rows[5].next_attempt_at).toBeNull();
  expect(t.rx.received.filter((x) => x.headers['svc-event-id'] === eventId)).toHaveLength(6);
  const got = await request(t.baseUrl, 'GET', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
  expect(got.body.data.failure_count).toBe(6);

  t.rx.respond(reply(204));
  const retry = await request(t.baseUrl, 'POST', `/api/v1/locations/${t.loc.id}/webhook-deliveries/${rows[5].id}/retry`, { token: t.token });
  expect(retry.status).toBe(202);
  expect(retry.body.data).toMatchObject({ event_id: eventId, attempt: 7, status: 'pending' });
  await waitFor(async () => (await deliveriesOf(t.owner, eventId)).some((x) => x.status === 'delivered'), 'retry delivered');
  const again = await request(t.baseUrl, 'POST', `/api/v1/locations/${t.loc.id}/webhook-deliveries/${retry.body.data.id}/retry`, { token: t.token });
  expect(again.status).toBe(409);
  await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
});

test('a receiver slower than WEBHOOK_TIMEOUT_MS fails the attempt; a 3xx is a failure (not followed)', async () => {
  t.rx.respond((_r, res) => { setTimeout(() => { res.writeHead(200); res.end('late'); }, 4000); }, reply(302, '', { location: 'https://example.com/' }), reply(200));
  const ep = await endpoint();
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const rows = await attemptsUntil(t.owner, eventId, 'delivered', 'delivered after timeout and redirect');
  expect(rows[0]).toMatchObject({ status: 'failed', response_status: null, error: expect.stringMatching(/within 1500 ms/) });
  expect(rows[1]).toMatchObject({ status: 'failed', response_status: 302, error: expect.stringMatching(/Redirect/) });
  expect(rows[2].status).toBe('delivered');
  await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
});

test('pause holds pending retries and gets no new events; resume delivers them', async () => {
  // Retries 5 s apart here, so the pause lands before the retry is due even on a busy machine
  // (with the file's zero delays every attempt could fail before the PATCH commits).
  await t.restartWorker({ ...t.cfg, WEBHOOK_RETRY_DELAYS: [5, 5, 5, 5, 5] });
  t.rx.respond(reply(500));
  const ep = await endpoint();
  // Pause right after the first failure: the retry is created but held.
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  await waitFor(async () => (await deliveriesOf(t.owner, eventId)).length >= 1 && t.rx.received.length >= 1, 'first attempt');
  const p = await request(t.baseUrl, 'PATCH', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token, body: { active: false } });
  expect(p.status).toBe(200);
  expect(p.body.data.active).toBe(false);
  t.rx.respond(reply(200));
  const countAtPause = t.rx.received.length;
  const newEvent = await emit(t.owner, t.loc.id, 'lead.created', lead);
  await sleep(800);
  expect(await deliveriesOf(t.owner, newEvent)).toEqual([]);
  const held = await deliveriesOf(t.owner, eventId);
  expect(held.at(-1)!.status).toBe('pending');
  expect(t.rx.received.length - countAtPause).toBeLessThanOrEqual(1); // at most an attempt already in flight

  const r = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${t.loc.id}/webhook-endpoints/${ep.id}`, { token: t.token, body: { active: true } });
  expect(r.body.data.active).toBe(true);
  await waitFor(async () => (await deliveriesOf(t.owner, eventId)).some((x) => x.status === 'delivered'), 'resumed delivery');
  await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
  await t.restartWorker();
});

test('DELETE discards pending deliveries; nothing is sent afterwards', async () => {
  t.rx.respond(reply(500));
  const ep = await endpoint();
  await request(t.baseUrl, 'PATCH', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token, body: { active: false } });
  // A test event to a paused endpoint is queued and held.
  const tst = await request(t.baseUrl, 'POST', `/api/v1/webhook-endpoints/${ep.id}/test`, { token: t.token });
  expect(tst.status).toBe(202);
  expect(tst.body.data).toMatchObject({ event: 'webhook.test', status: 'pending', attempt: 1 });
  const del = await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
  expect(del.status).toBe(200);
  expect(del.body.data.id).toBe(ep.id);
  const before = t.rx.received.length;
  expect(await deliveriesOf(t.owner, tst.body.data.event_id)).toEqual([]);
  await sleep(600);
  expect(t.rx.received.length).toBe(before);
  expect((await request(t.baseUrl, 'GET', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token })).status).toBe(404);
});

test('test event and secret rotation: both signatures for 24 h', async () => {
  const ep = await endpoint(['call.ended']);
  const rot = await request(t.baseUrl, 'POST', `/api/v1/webhook-endpoints/${ep.id}/rotate-secret`, { token: t.token });
  expect(rot.status).toBe(200);
  expect(rot.body.data.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  expect(rot.body.data.secret).not.toBe(ep.secret);
  const tst = await request(t.baseUrl, 'POST', `/api/v1/webhook-endpoints/${ep.id}/test`, { token: t.token });
  const r = await waitFor(async () => t.rx.received.find((x) => x.headers['svc-event-id'] === tst.body.data.event_id), 'test event');
  expect(r.headers['svc-event']).toBe('webhook.test');
  const sig = (s: string) => `v1=${createHmac('sha256', s).update(r.raw).digest('hex')}`;
  expect(r.headers['svc-signature']).toBe(`${sig(rot.body.data.secret)} ${sig(ep.secret)}`);
  await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
});

test('connect-time SSRF guard refuses a name resolving to loopback when private targets are not allowed', async () => {
  const strict = loadConfig({ ...process.env, LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false', WEBHOOK_RETRY_DELAYS: '3600', WEBHOOK_TIMEOUT_MS: '1500', DATABASE_URL: t.db.url });
  // Registered while allowed (the harness default), then the worker runs with the guard on.
  await t.worker!.stop();
  const ep = await endpoint(['spam.blocked'], `https://localhost:${t.rx.port}/hook`);
  const strictWorker = await startTestWorker(strict, t.db.url, t.pki);
  try {
    const eventId = await emit(t.owner, t.loc.id, 'spam.blocked', { call_id: 'c' });
    const rows = await waitFor(async () => {
      const r = await deliveriesOf(t.owner, eventId);
      return r[0]?.status === 'failed' && r;
    }, 'refused attempt');
    expect(rows[0].error).toMatch(/non-public/);
    expect(t.rx.received.filter((x) => x.headers['svc-event-id'] === eventId)).toHaveLength(0);
  } finally {
    await strictWorker.stop();
    t.worker = await startTestWorker(t.cfg, t.db.url, t.pki);
    await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.id}`, { token: t.token });
  }
});
