/**
 * An erasure that commits while a webhook attempt or a notification of the caller's event is in
 * flight (docs/privacy.md "Erasure"): the receiver (and the chat API) answer only after the
 * erasure, echoing what they were sent, and the recorded attempt and notification log keep no
 * answer, so GET webhook-deliveries and GET notifications?include=log serve none of the caller.
 * The record steps run with the real worker against slow HTTPS stand-ins; then the record
 * functions are driven directly against an erasure that is still open, in both orders.
 */
import type { ServerResponse } from 'node:http';
import type pg from 'pg';
import { useFanoutRig } from '../support/receivers.js';
import type { Received } from '../support/https.js';
import { mintKey, request, waitFor } from '../support/harness.js';
import { sleep } from '../webhooks/support.js';
import { voiceLocation } from '../platform/support.js';
import { connectSlack } from '../notify/support.js';

const t = useFanoutRig('inflight', {});
const caller = { name: 'Lucinda Brouhaha', phone: '+15125550177', address: '3 Emu Street, Austin' };
const LEAK = /Lucinda|Brouhaha|5125550177|Emu Street/;

/** A responder that holds each request until `release()`, then answers 200 echoing its body. */
function held(status: number) {
  let release!: () => void;
  const gate = new Promise<void>((ok) => { release = ok; });
  const responder = (r: Received, res: ServerResponse) => {
    void gate.then(() => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, echo: r.body }));
    });
  };
  return { responder, release };
}

test('answers that arrive after the erasure committed are not stored', async () => {
  await t.startWorker();
  const loc = await voiceLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  await connectSlack(t.apiPool, loc.id, t.rx.slack.url);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, { token, body: { url: t.rx.hooks.url, events: ['lead.created'] } });
  expect(ep.status).toBe(201);
  const hook = held(200);
  const chat = held(200);
  t.rx.hooks.respond(hook.responder);
  t.rx.slack.respond(chat.responder);

  const lead = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/leads`, { token, body: caller });
  expect(lead.status).toBe(201);
  // Both are in flight: the receivers have the caller's data and have not answered.
  await waitFor(async () => t.rx.hooks.received.some((r) => r.body.includes(caller.name)) && t.rx.slack.received.some((r) => r.body.includes(caller.name)),
    'the webhook and the chat message in flight', 20000);

  const erased = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/erasures`, { token, body: { phone: caller.phone } });
  expect(erased.status).toBe(202);
  hook.release();
  chat.release();

  const recorded = async () => {
    const { rows } = await t.owner.query(
      `select (select count(*) from app.webhook_deliveries where location_id = $1 and event = 'lead.created' and status = 'delivered')::int as delivered,
              (select count(*) from app.notification_log where location_id = $1)::int as logged`, [loc.id]);
    return rows[0].delivered === 1 && rows[0].logged >= 1;
  };
  await waitFor(recorded, 'the attempt and the notification recorded', 20000);
  const deliveries = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/webhook-deliveries`, { token });
  const notifications = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/notifications?include=log`, { token });
  expect([deliveries.status, notifications.status]).toEqual([200, 200]);
  expect(JSON.stringify(deliveries.body)).toContain('"status":"delivered"');
  expect(JSON.stringify(notifications.body)).toContain('"status":"sent"');
  expect(JSON.stringify([deliveries.body, notifications.body])).not.toMatch(LEAK);
  const { rows } = await t.owner.query(
    `select (select json_agg(response_body) from app.webhook_deliveries where location_id = $1) as bodies,
            (select json_agg(detail) from app.notification_log where location_id = $1) as details`, [loc.id]);
  expect(JSON.stringify(rows)).not.toMatch(LEAK);
});

/** A location with a lead of the caller whose webhook attempt and chat notification are pending (no worker). */
async function pendingOutbound(ok = true) {
  await t.worker?.stop();
  t.worker = undefined;
  const loc = await voiceLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  await connectSlack(t.apiPool, loc.id, t.rx.slack.url);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, { token, body: { url: t.rx.hooks.url, events: ['lead.created'] } });
  expect(ep.status).toBe(201);
  expect((await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/leads`, { token, body: caller })).status).toBe(201);
  const { rows: [d] } = await t.owner.query(`select id, endpoint_id from app.webhook_deliveries where location_id = $1 and event = 'lead.created'`, [loc.id]);
  const { rows: [n] } = await t.owner.query(
    `update app.notifications set lease_owner = 'test-engine', lease_expires_at = now() + interval '1 minute'
      where location_id = $1 and channel = 'chat' returning id`, [loc.id]);
  expect(d && n).toBeTruthy();
  const echo = `{"ok":true,"echo":"${caller.name} ${caller.phone}"}`;
  const recordNote = (db: Pick<pg.Pool, 'query'>) => db.query('select app.notification_record_batch($1, $2, 5)', [
    'test-engine', JSON.stringify([{ id: n.id, status: 'sent', detail: `slack: HTTP 200 ${echo}`, response_status: 200 }])]);
  const recordHook = (db: Pick<pg.Pool, 'query'>) => db.query('select app.webhook_record_batch($1, $2, 10, 3600)', [
    JSON.stringify([{ delivery_id: d.id, endpoint_id: d.endpoint_id, result: { ok, response_status: ok ? 200 : 500, response_body: echo, duration_ms: 5, attempted_at: new Date().toISOString() } }]), [60]]);
  /** Both records, side by side on the pool's connections, or one after the other in a client's transaction. */
  const record = async (client?: pg.PoolClient) => {
    if (!client) return void (await Promise.all([recordNote(t.owner), recordHook(t.owner)]));
    await recordNote(client);
    await recordHook(client);
  };
  const stored = async () => JSON.stringify((await t.owner.query(
    `select (select json_agg(response_body) from app.webhook_deliveries where location_id = $1) as bodies,
            (select json_agg(detail) from app.notification_log where location_id = $1) as details`, [loc.id])).rows);
  return { loc, record, stored };
}

/** Runs the erasure of the caller in a transaction left open until `commit()`. */
async function openErasure(locationId: string) {
  const c = await t.owner.connect();
  await c.query('begin');
  await c.query(`select set_config('app.location_id', $1, true)`, [locationId]);
  const run = c.query(`select app.erasure_perform($1, $2, null, null, 'api', null, false)`, [locationId, caller.phone]);
  return { run, commit: async () => { await run; await c.query('commit'); c.release(); } };
}

test('recording while an erasure is open: whichever takes the rows first, no answer of the caller is stored', async () => {
  // The erasure first: the record waits for it, then finds the event cleared.
  const a = await pendingOutbound();
  const first = await openErasure(a.loc.id);
  await first.run;
  const recording = a.record();
  await sleep(300);
  await first.commit();
  await recording;
  const afterFirst = await a.stored();
  expect(afterFirst).toContain('null');
  expect(afterFirst).not.toMatch(LEAK);

  // A failed attempt (a 500 echoing the body) is recorded one by one (app.webhook_record): the same.
  const f = await pendingOutbound(false);
  const failing = await openErasure(f.loc.id);
  await failing.run;
  const recordingFailure = f.record();
  await sleep(300);
  await failing.commit();
  await recordingFailure;
  expect(await f.stored()).not.toMatch(LEAK);

  // The record first, its transaction still open: the erasure waits for it, then clears what it wrote.
  const b = await pendingOutbound();
  const c = await t.owner.connect();
  try {
    await c.query('begin');
    await b.record(c);
    const second = await openErasure(b.loc.id);
    await sleep(300);
    await c.query('commit');
    await second.commit();
  } finally {
    c.release();
  }
  expect(await b.stored()).not.toMatch(LEAK);
});
