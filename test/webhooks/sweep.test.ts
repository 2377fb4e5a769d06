/**
 * At-least-once, the sweeper's side (docs/delivery-engine.md): app.webhook_sweep re-queues a
 * pending attempt whose lease lapsed without a result (its worker died), and leaves alone an
 * attempt a live worker is sending (its lease is current), so that attempt is sent exactly once.
 * An attempt of a deleted endpoint whose worker died is discarded, as DELETE would have done.
 */
import type { ServerResponse } from 'node:http';
import { asLocation, createLocation, tenant, testLog } from '../support/harness.js';
import { makeSweepTask } from '../../src/worker/sweep.js';
import { reply, type Responder } from '../support/https.js';
import { createEndpoint, deliveriesOf, emit, useWebhookRig, waitFor } from './support.js';

// A long time-out keeps the held attempt in flight for the whole test; no automatic retry.
const t = useWebhookRig({ WEBHOOK_RETRY_DELAYS: '3600', WEBHOOK_TIMEOUT_MS: '30000' });

async function leaseOf(deliveryId: string) {
  const { rows } = await t.owner.query(
    `select lease_owner, lease_expires_at > now() as live from app.webhook_deliveries where id = $1`, [deliveryId]);
  return rows[0] as { lease_owner: string | null; live: boolean | null } | undefined;
}

/** A pending attempt as a worker that died mid-send leaves it: leased, lease lapsed 5 minutes ago. */
async function deadAttempt(locationId: string, eventId: string, endpointId: string | null, url: string): Promise<string> {
  return asLocation(t.owner, locationId, async (c) => {
    const { rows } = await c.query(
      `insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at,
                                           attempted_at, lease_owner, lease_expires_at)
       values ($1, $2, $3, 'lead.created', 1, 'pending', $4, now() - interval '6 minutes',
               now() - interval '6 minutes', 'engine:dead-host:1:00000000', now() - interval '5 minutes') returning id`,
      [locationId, eventId, endpointId, url]);
    return rows[0].id as string;
  });
}

const requestsFor = (deliveryId: string) => t.rx.received.filter((r) => r.headers['svc-delivery-id'] === deliveryId);

test('the sweeper skips an attempt still in flight and re-queues one whose worker died', async () => {
  const { loc, token } = await tenant(t);
  const { id: endpointId } = await createEndpoint(t, token, loc.id, { url: t.rx.url, events: ['call.ended'] });

  // The first request is held open (answered only when the test says so); later ones get 200.
  let held: ServerResponse | undefined;
  const hold: Responder = (_r, res) => {
    held = res;
  };
  t.rx.respond(hold, reply(200, 'ok'));

  // A: in flight — the engine leased it and is waiting for the receiver.
  const eventA = await emit(t.owner, loc.id, 'call.ended', { id: 'call-a' });
  await waitFor(async () => held !== undefined, 'attempt A reached the receiver');
  const [a] = await deliveriesOf(t.owner, eventA);
  expect(a.status).toBe('pending');
  expect(await leaseOf(a.id)).toEqual({ lease_owner: t.worker!.worker.engine.id, live: true });
  expect(requestsFor(a.id)).toHaveLength(1);

  // B: an attempt whose worker died mid-send (lease lapsed, no result).
  const eventB = await emit(t.owner, loc.id, 'lead.created', { id: 'lead-b' }); // not subscribed: no fan-out
  expect(await deliveriesOf(t.owner, eventB)).toEqual([]);
  const b = await deadAttempt(loc.id, eventB, endpointId, t.rx.url);
  // No engine touches it while its (lapsed) lease stands.
  expect(await leaseOf(b)).toEqual({ lease_owner: 'engine:dead-host:1:00000000', live: false });

  // Sweep: A's lease is current, B's lapsed; only B is freed.
  const { rows: [{ n }] } = await t.owner.query('select app.webhook_sweep(0) as n');
  expect(n).toBe(1);
  expect((await leaseOf(a.id))?.live).toBe(true);

  // B is delivered by the engine (same delivery id: the dead attempt produced no result); A is
  // still in flight and was not sent again.
  await waitFor(async () => (await deliveriesOf(t.owner, eventB))[0]?.status === 'delivered', 'B delivered');
  expect(requestsFor(b)).toHaveLength(1);
  expect((await deliveriesOf(t.owner, eventA)).map((d) => d.status)).toEqual(['pending']);
  expect(requestsFor(a.id)).toHaveLength(1);
  // The cron task itself, run again now, still leaves A alone.
  await makeSweepTask({ cfg: t.cfg, log: testLog, pool: t.owner })({ grace_seconds: 0 }, {} as never);
  expect((await leaseOf(a.id))?.live).toBe(true);

  // Release A: it is recorded once, and no other request for it ever went out.
  held!.writeHead(200, { 'content-type': 'text/plain' });
  held!.end('ok');
  const rowsA = await waitFor(async () => {
    const r = await deliveriesOf(t.owner, eventA);
    return r[0]?.status === 'delivered' && r;
  }, 'A delivered');
  expect(rowsA.map((d) => [d.attempt, d.status, d.response_status])).toEqual([[1, 'delivered', 200]]);
  expect(await leaseOf(a.id)).toEqual({ lease_owner: null, live: null });
  expect(requestsFor(a.id)).toHaveLength(1);
  expect(requestsFor(b)).toHaveLength(1);
  expect(t.rx.received).toHaveLength(2);
});

test('a dead attempt of an endpoint deleted meanwhile is discarded, not sent', async () => {
  const loc = await createLocation(t.owner);
  const eventC = await emit(t.owner, loc.id, 'lead.created', { id: 'lead-c' });
  const c = await deadAttempt(loc.id, eventC, null, t.rx.url);
  const before = t.rx.received.length;
  const { rows: [{ n }] } = await t.owner.query('select app.webhook_sweep(0) as n');
  expect(n).toBe(0);
  expect(await deliveriesOf(t.owner, eventC)).toEqual([]);
  expect((await t.owner.query('select 1 from app.webhook_deliveries where id = $1', [c])).rowCount).toBe(0);
  expect(t.rx.received.length).toBe(before);
});

test('a lease lasts WEBHOOK_TIMEOUT_MS + DELIVERY_LEASE_GRACE_MS: 30 s of grace by default, the setting otherwise', async () => {
  const { loc, token } = await tenant(t);
  const ep = await createEndpoint(t, token, loc.id, { url: t.rx.url, events: ['call.ended'] });
  /** Seconds left on the lease of an attempt the receiver holds open, and its release. */
  const leaseLeft = async (callId: string) => {
    let held: ServerResponse | undefined;
    t.rx.respond((_r, res) => {
      held = res;
    });
    const eventId = await emit(t.owner, loc.id, 'call.ended', { id: callId });
    await waitFor(async () => held !== undefined, 'the attempt reached the receiver');
    const { rows: [r] } = await t.owner.query(
      `select extract(epoch from d.lease_expires_at - now())::float8 as left from app.webhook_deliveries d where d.event_id = $1`, [eventId]);
    held!.writeHead(200).end('ok');
    await waitFor(async () => (await deliveriesOf(t.owner, eventId))[0]?.status === 'delivered', 'delivered');
    return r.left as number;
  };
  // The rig's worker: the 30 s time-out plus the default 30 s.
  const byDefault = await leaseLeft('lease-default');
  expect(byDefault).toBeGreaterThan(50);
  expect(byDefault).toBeLessThanOrEqual(60);
  await t.restartWorker({ ...t.cfg, DELIVERY_LEASE_GRACE_MS: 4000 });
  try {
    const configured = await leaseLeft('lease-configured');
    expect(configured).toBeGreaterThan(24);
    expect(configured).toBeLessThanOrEqual(34);
  } finally {
    await t.restartWorker();
    await t.owner.query('delete from app.webhook_endpoints where id = $1', [ep.id]);
  }
});
