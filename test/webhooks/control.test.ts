/**
 * Pause and DELETE while attempts are in flight (docs/webhooks.md, "Pause and delete"): both answer
 * at once (nothing holds a lock across a POST), no attempt starts after the response, and the
 * attempts already in flight finish and are recorded.
 */
import type { ServerResponse } from 'node:http';
import { request, tenant } from '../support/harness.js';
import type { Responder } from '../support/https.js';
import { createEndpoint, emitMany, sleep, useWebhookRig, waitFor } from './support.js';

// Receivers hold requests far longer than the API's 15 s statement time-out could wait.
const t = useWebhookRig({ WEBHOOK_RETRY_DELAYS: '3600', WEBHOOK_TIMEOUT_MS: '60000' });

const statuses = (endpointId: string) =>
  t.owner.query(`select status, count(*)::int as n from app.webhook_deliveries where endpoint_id = $1 group by status order by status`, [endpointId])
    .then((r) => Object.fromEntries(r.rows.map((x) => [x.status, x.n])));

test('pause, then DELETE, with attempts in flight: both answer at once, nothing starts afterwards, the in-flight ones are recorded', async () => {
  const { loc, token } = await tenant(t);
  const { id } = await createEndpoint(t, token, loc.id, { url: t.rx.url, events: ['lead.created'] });

  const held: ServerResponse[] = [];
  const hold: Responder = (_r, res) => {
    held.push(res);
  };
  t.rx.respond(hold);
  await emitMany(t.owner, loc.id, 'lead.created', 20);
  await waitFor(async () => held.length === 2, 'two attempts in flight (the per-endpoint cap)');

  // Pause: answered while two attempts are in flight.
  const paused = await request(t.baseUrl, 'PATCH', `/api/v1/webhook-endpoints/${id}`, { token, body: { active: false } });
  expect(paused.status).toBe(200);
  expect(paused.body.data.active).toBe(false);
  // The in-flight ones finish and are recorded; none of the 18 others starts.
  for (const res of held.splice(0)) {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  }
  await waitFor(async () => (await statuses(id)).delivered === 2, 'in-flight attempts recorded');
  await sleep(500);
  expect(t.rx.received).toHaveLength(2);
  expect(await statuses(id)).toEqual({ delivered: 2, pending: 18 });

  // Resume: deliveries start again (two at a time); DELETE while two are in flight.
  expect((await request(t.baseUrl, 'PATCH', `/api/v1/webhook-endpoints/${id}`, { token, body: { active: true } })).status).toBe(200);
  await waitFor(async () => held.length === 2, 'two attempts in flight again');
  const inFlight = t.rx.received.slice(2).map((r) => r.headers['svc-delivery-id']);
  const del = await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${id}`, { token });
  expect(del.status).toBe(200);
  expect(del.body.data.id).toBe(id);
  // The 16 attempts nobody was sending are gone; the two in flight are kept and recorded.
  const { rows: kept } = await t.owner.query(
    `select id, status, endpoint_id from app.webhook_deliveries where location_id = $1 and status = 'pending' order by id`, [loc.id]);
  expect(kept.map((r) => r.id).sort()).toEqual([...inFlight].sort());
  expect(kept.every((r) => r.endpoint_id === null)).toBe(true);
  for (const res of held.splice(0)) {
    res.writeHead(204);
    res.end();
  }
  await waitFor(async () => (await t.owner.query(
    `select count(*)::int as n from app.webhook_deliveries where id = any($1::uuid[]) and status = 'delivered'`, [inFlight])).rows[0].n === 2,
  'in-flight attempts recorded after DELETE');
  await sleep(500);
  expect(t.rx.received).toHaveLength(4);
});
