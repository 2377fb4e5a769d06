/**
 * DELETE of an endpoint while the worker records an attempt's outcome. Both take the endpoint
 * row and the attempt row; taken in opposite orders they deadlocked, and the DELETE (or the
 * worker's whole batch) was aborted. The interleaving is forced with a third transaction that
 * share-locks the endpoint, as a claim does, so that both writers queue on it.
 */
import pg from 'pg';
import { createLocation, mintKey, request, startTestApi, waitingOnLock, type TestApi } from '../support/harness.js';
import { emit } from './support.js';

let t: TestApi;
let loc: { id: string };
let token: string;

beforeAll(async () => {
  t = await startTestApi();
  loc = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
});
afterAll(() => t.close());

test('an endpoint deleted while its first success is being recorded: both commit, the attempt is kept as history', async () => {
  const created = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, {
    token, body: { url: 'https://hooks.example.test/in', events: ['lead.created'] },
  });
  expect(created.status).toBe(201);
  const endpointId: string = created.body.data.id;
  const eventId = await emit(t.owner, loc.id, 'lead.created', { id: 'lead-1' });
  const { rows: [claim] } = await t.owner.query(`select app.webhook_claim_batch('delete-race', 10, 10, 10, 60000) as c`);
  const [leased] = claim.c.claims ?? claim.c;
  expect(leased).toMatchObject({ event_id: eventId, endpoint_id: endpointId });

  const claimer = new pg.Client({ connectionString: t.db.url });
  const recorder = new pg.Client({ connectionString: t.db.url });
  await claimer.connect();
  await recorder.connect();
  try {
    // A claim holds the endpoint share-locked.
    await claimer.query('begin');
    await claimer.query('select 1 from app.webhook_endpoints where id = $1 for share', [endpointId]);
    // The DELETE queues on it first…
    const deleting = request(t.baseUrl, 'DELETE', `/api/v1/locations/${loc.id}/webhook-endpoints/${endpointId}`, { token });
    await waitingOnLock(t.owner, { query: '%webhook_endpoint_delete%' });
    // …then the worker records the endpoint's first success (which refreshes last_success_at).
    const recorderPid: number = (await recorder.query('select pg_backend_pid() as pid')).rows[0].pid;
    const recording = recorder.query(
      `select app.webhook_record($1, $2, '{0,0}', 10, 60) as r`,
      [leased.delivery_id, JSON.stringify({ ok: true, response_status: 200, duration_ms: 5, attempted_at: new Date().toISOString() })]);
    await waitingOnLock(t.owner, { pid: recorderPid });
    await claimer.query('commit');

    const [deleted, recorded] = await Promise.all([deleting, recording]);
    expect(deleted.status).toBe(200);
    expect(recorded.rows[0].r).toMatchObject({ delivery_id: leased.delivery_id, status: 'delivered' });
  } finally {
    await claimer.end();
    await recorder.end();
  }
  const { rows } = await t.owner.query(
    'select status, endpoint_id from app.webhook_deliveries where event_id = $1', [eventId]);
  expect(rows).toEqual([{ status: 'delivered', endpoint_id: null }]);
  expect((await t.owner.query('select count(*)::int as n from app.webhook_endpoints where id = $1', [endpointId])).rows[0].n).toBe(0);
});
