/**
 * POST /webhook-endpoints/{id}/recover: re-sends what an endpoint missed (paused or disabled
 * periods, dead deliveries), never what it already has or has pending; bounds, errors, scopes.
 */
import { callFn } from '../../src/db/pools.js';
import { hashToken } from '../../src/auth/tokens.js';
import { mintKey, request, tenant, type TestLocation } from '../support/harness.js';
import { reply } from '../support/https.js';
import { createEndpoint, deliveriesOf, emit, startTestWorker, useWebhookRig, waitFor } from './support.js';

const t = useWebhookRig({ WEBHOOK_RETRY_DELAYS: '0', WEBHOOK_TIMEOUT_MS: '3000', DELIVERY_RETENTION_DAYS: '7' }, { tenant: true, resetEach: true });
let other: TestLocation;
let otherToken: string;
let readOnly: string;
beforeAll(async () => {
  ({ loc: other, token: otherToken } = await tenant(t));
  ({ token: readOnly } = await mintKey(t.owner, t.loc.id, ['webhooks:read']));
});

const endpoint = (events: string[], tok = t.token, location = t.loc.id) => createEndpoint(t, tok, location, { url: t.rx.url, events });
const recover = (id: string, body: unknown, tok = t.token, path = `/api/v1/webhook-endpoints/${id}/recover`) =>
  request(t.baseUrl, 'POST', path, { token: tok, body });
const patch = (id: string, body: unknown) => request(t.baseUrl, 'PATCH', `/webhook-endpoints/${id}`, { token: t.token, body });
const nowIso = async (offset = '0 seconds') =>
  (await t.owner.query(`select app.iso(now() + $1::interval) as t`, [offset])).rows[0].t as string;
const receivedIds = (id: string) => t.rx.received.filter((r) => r.headers['svc-event-id'] === id);
const lead = (n: number) => ({ id: `7d6f1c1e-7b0a-4b59-9f7e-00000000000${n}`, name: `Lead ${n}`, status: 'new' });

test('re-sends paused-period and dead events once; skips delivered, pending, unsubscribed and older ones', async () => {
  const ep = await endpoint(['lead.created', 'booking.created']);
  const before = await emit(t.owner, t.loc.id, 'lead.created', lead(0));
  await waitFor(async () => (await deliveriesOf(t.owner, before))[0]?.status === 'delivered', 'delivered before since');
  const since = await nowIso();

  const delivered = await emit(t.owner, t.loc.id, 'lead.created', lead(1));
  await waitFor(async () => (await deliveriesOf(t.owner, delivered))[0]?.status === 'delivered', 'delivered');
  t.rx.respond(reply(500, 'down'));
  const dead = await emit(t.owner, t.loc.id, 'booking.created', { id: 'b1' });
  await waitFor(async () => (await deliveriesOf(t.owner, dead)).some((d) => d.status === 'dead'), 'dead');
  t.rx.respond(reply(200, 'ok'));

  expect((await patch(ep.id, { active: false })).status).toBe(200);
  const paused1 = await emit(t.owner, t.loc.id, 'lead.created', lead(2));
  const paused2 = await emit(t.owner, t.loc.id, 'booking.created', { id: 'b2' });
  const unsubscribed = await emit(t.owner, t.loc.id, 'call.ended', { id: 'c1' });
  const elsewhere = await emit(t.owner, other.id, 'lead.created', lead(3));
  // The fan-out made no attempt for the paused endpoint.
  expect(await deliveriesOf(t.owner, paused1)).toEqual([]);

  // Inactive → 409, nothing queued.
  const inactive = await recover(ep.id, { since });
  expect([inactive.status, inactive.body.error.code]).toEqual([409, 'conflict']);
  expect(await deliveriesOf(t.owner, paused1)).toEqual([]);

  expect((await patch(ep.id, { active: true })).status).toBe(200);
  t.rx.received.length = 0;
  const res = await recover(ep.id, { since });
  expect(res.status).toBe(202);
  expect(res.body).toEqual({ data: { queued: 3, has_more: false } });

  // Recorded, not only received (the worker records after the receiver answers).
  const recorded = async (id: string) => (await deliveriesOf(t.owner, id)).some((d) => d.status === 'delivered');
  await waitFor(async () => (await recorded(paused1)) && (await recorded(paused2)) && (await recorded(dead)), 'recovered deliveries');
  for (const id of [paused1, paused2, dead]) {
    expect(receivedIds(id)).toHaveLength(1);
    const rows = await deliveriesOf(t.owner, id);
    expect(rows.filter((d) => d.status === 'delivered')).toHaveLength(1);
  }
  // The recovered attempt is a new first attempt; the dead run stays as history.
  const deadRows = await deliveriesOf(t.owner, dead);
  expect(deadRows.map((d) => `${d.attempt}:${d.status}`).sort()).toEqual(['1:delivered', '1:failed', '2:dead']);
  for (const id of [before, delivered, unsubscribed]) expect(receivedIds(id)).toHaveLength(0);
  expect(await deliveriesOf(t.owner, unsubscribed)).toEqual([]);
  expect(await deliveriesOf(t.owner, elsewhere)).toEqual([]);

  // Once more: everything since is delivered → nothing queued.
  const again = await recover(ep.id, { since }, t.token, `/api/v1/locations/${t.loc.slug}/webhook-endpoints/${ep.id}/recover`);
  expect(again.status).toBe(202);
  expect(again.body.data).toEqual({ queued: 0, has_more: false });
  await request(t.baseUrl, 'DELETE', `/webhook-endpoints/${ep.id}`, { token: t.token });
});

test('an event with an attempt still pending for the endpoint is not queued twice; at most max_events per call', async () => {
  // Worker stopped: attempts stay pending.
  await t.worker!.stop();
  try {
    const ep = await endpoint(['lead.updated']);
    const since = await nowIso();
    const pending = await emit(t.owner, t.loc.id, 'lead.updated', lead(4));
    expect((await deliveriesOf(t.owner, pending)).map((d) => d.status)).toEqual(['pending']);
    expect((await recover(ep.id, { since })).body.data).toEqual({ queued: 0, has_more: false });
    expect(await deliveriesOf(t.owner, pending)).toHaveLength(1);

    // Five missed events (paused), recovered two at a time: the SQL function's bound.
    await patch(ep.id, { active: false });
    const missed = [];
    for (let i = 0; i < 5; i++) missed.push(await emit(t.owner, t.loc.id, 'lead.updated', lead(5 + i)));
    await patch(ep.id, { active: true });
    const call = () => callFn<{ queued: number; has_more: boolean }>(t.owner, 'api.webhook_endpoint_recover',
      [hashToken(t.token), null, ep.id, since, 7, 2]);
    expect(await call()).toEqual({ queued: 2, has_more: true });
    expect(await call()).toEqual({ queued: 2, has_more: true });
    expect(await call()).toEqual({ queued: 1, has_more: false });
    expect(await call()).toEqual({ queued: 0, has_more: false });
    // Oldest first, one attempt each, each due now for the delivery engine (unleased).
    for (const id of missed) expect((await deliveriesOf(t.owner, id)).map((d) => [d.attempt, d.status])).toEqual([[1, 'pending']]);
    const { rows } = await t.owner.query(
      `select count(*)::int as n from app.webhook_deliveries d
        where d.event_id = any ($1::uuid[]) and d.endpoint_id = $2 and d.status = 'pending'
          and d.next_attempt_at <= now() and d.lease_expires_at is null`, [missed, ep.id]);
    expect(rows[0].n).toBe(5);
    await request(t.baseUrl, 'DELETE', `/webhook-endpoints/${ep.id}`, { token: t.token });
  } finally {
    t.worker = await startTestWorker(t.cfg, t.db.url, t.pki);
  }
});

test('400 for since in the future, beyond retention, malformed or missing; 404 for another location; 403 without webhooks:write; 401 without a token', async () => {
  const ep = await endpoint(['lead.created']);
  const cases: Array<[unknown, string]> = [
    [{ since: await nowIso('1 hour') }, 'since'],
    [{ since: await nowIso('-8 days') }, 'since'],
    [{ since: 'yesterday' }, 'since'],
    [{ since: '2026-13-01T00:00:00Z' }, 'since'],
    [{}, 'since'],
    [{ since: await nowIso('-1 hour'), extra: 1 }, ''],
  ];
  for (const [body, path] of cases) {
    const res = await recover(ep.id, body);
    expect([JSON.stringify(body), res.status, res.body.error.code]).toEqual([JSON.stringify(body), 400, 'validation_error']);
    expect(res.body.error.details.issues[0].path).toBe(path);
  }
  const ok = { since: await nowIso('-6 days') };
  expect((await recover(ep.id, ok)).status).toBe(202);
  // Offsets are accepted.
  expect((await recover(ep.id, { since: '2099-01-01T00:00:00+02:00' })).status).toBe(400);

  const foreign = await endpoint(['lead.created'], otherToken, other.id);
  expect((await recover(foreign.id, ok)).status).toBe(404);
  expect((await recover(foreign.id, ok, t.token, `/api/v1/locations/${t.loc.id}/webhook-endpoints/${foreign.id}/recover`)).status).toBe(404);
  expect((await recover(ep.id, ok, t.token, `/api/v1/locations/${other.id}/webhook-endpoints/${ep.id}/recover`)).status).toBe(404);
  expect((await recover('not-a-uuid', ok)).status).toBe(404);
  const ro = await recover(ep.id, ok, readOnly);
  expect([ro.status, ro.body.error.details.required_scope]).toEqual([403, 'webhooks:write']);
  expect((await request(t.baseUrl, 'POST', `/webhook-endpoints/${ep.id}/recover`, { body: ok })).status).toBe(401);
  await request(t.baseUrl, 'DELETE', `/webhook-endpoints/${ep.id}`, { token: t.token });
});
