/**
 * Recovery of a long outage in one call: RECOVER_MAX_EVENTS (10,000) missed events are queued by
 * one POST /recover, oldest first, each as a pending first attempt due now; the next call takes
 * the rest. (How long it takes is measured by bench/recover-plan.ts, not asserted here.)
 */
import { RECOVER_MAX_EVENTS } from '../../src/http/routes/webhooks.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { emitMany } from './support.js';

let t: TestApi;
beforeAll(async () => {
  t = await startTestApi();
});
afterAll(() => t?.close());

test(`one call queues ${RECOVER_MAX_EVENTS} missed events; the next one the rest`, async () => {
  expect(RECOVER_MAX_EVENTS).toBe(10_000);
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, {
    token, body: { url: 'https://127.0.0.1:9/hook', events: ['call.ended'], active: false },
  });
  expect(ep.status).toBe(201);
  const since = (await t.owner.query(`select app.iso(now()) as t`)).rows[0].t as string;
  await emitMany(t.owner, loc.id, 'call.ended', 5); // the oldest (an earlier transaction)
  await emitMany(t.owner, loc.id, 'call.ended', RECOVER_MAX_EVENTS);
  expect((await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${ep.body.data.id}`, { token, body: { active: true } })).status).toBe(200);

  const first = await request(t.baseUrl, 'POST', `/webhook-endpoints/${ep.body.data.id}/recover`, { token, body: { since } });
  expect(first.status).toBe(202);
  expect(first.body.data).toEqual({ queued: RECOVER_MAX_EVENTS, has_more: true });
  const { rows } = await t.owner.query(
    `select count(*)::int as n, count(*) filter (where d.attempt = 1 and d.next_attempt_at <= now())::int as due,
            count(*) filter (where ev.created_at = (select min(created_at) from app.events where location_id = $2))::int as oldest
       from app.webhook_deliveries d join app.events ev on ev.id = d.event_id
      where d.endpoint_id = $1 and d.status = 'pending'`, [ep.body.data.id, loc.id]);
  expect(rows[0]).toEqual({ n: RECOVER_MAX_EVENTS, due: RECOVER_MAX_EVENTS, oldest: 5 }); // oldest first

  const second = await request(t.baseUrl, 'POST', `/webhook-endpoints/${ep.body.data.id}/recover`, { token, body: { since } });
  expect(second.body.data).toEqual({ queued: 5, has_more: false });
});
