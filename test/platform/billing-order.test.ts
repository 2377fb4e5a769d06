/**
 * Stripe events out of order (docs/voice.md §14): an older event (new id) arriving late is
 * recorded as processed, answered `stale`, and moves nothing — neither the subscription nor the
 * customer → location mapping that later events without metadata are routed by.
 */
import { createLocation, startTestApi, type TestApi } from '../support/harness.js';
import { BILLING_SECRET, billingFixture, count, postBilling } from './support.js';

let t: TestApi;
let a: { id: string };
let b: { id: string };

beforeAll(async () => {
  t = await startTestApi({ BILLING_WEBHOOK_SECRET: BILLING_SECRET });
  a = await createLocation(t.owner, { name: 'Acme Heating & Air' });
  b = await createLocation(t.owner, { name: 'Bravo Plumbing' });
});
afterAll(() => t.close());

const T2 = 1797955300;
const T1 = T2 - 3600;

/** A subscription event of `type` created at `created`, for sub/customer, metadata naming `loc` (or none). */
function subEvent(id: string, type: string, created: number, ids: { sub: string; cus: string }, loc: { id: string } | null) {
  const evt = billingFixture('subscription-updated', a.id);
  evt.id = id;
  evt.type = type;
  evt.created = created;
  evt.data.object = { ...evt.data.object, id: ids.sub, customer: ids.cus, metadata: loc ? { location_id: loc.id } : {} };
  return evt;
}

const mapping = async (cus: string) =>
  (await t.owner.query(`select location_id from billing.customers where id = $1`, [cus])).rows[0]?.location_id;
const subLocation = async (sub: string) =>
  (await t.owner.query(`select location_id from billing.subscriptions where id = $1`, [sub])).rows[0]?.location_id;

test('an older subscription event naming another location moves neither the subscription nor the customer mapping', async () => {
  // Setup: the newer state, location A.
  const ids = { sub: 'sub_order_1', cus: 'cus_order_1' };
  const newer = await postBilling(t.baseUrl, subEvent('evt_order_1a', 'customer.subscription.updated', T2, ids, a));
  expect(newer.body.data).toMatchObject({ status: 'applied', location_id: a.id });

  // Action: an older event (new id) naming location B arrives late.
  const stale = await postBilling(t.baseUrl, subEvent('evt_order_1b', 'customer.subscription.created', T1, ids, b));

  // Assertions: 200 `stale`, recorded as processed, nothing moved to B.
  expect(stale.status).toBe(200);
  expect(stale.body.data).toEqual({ status: 'stale', event_id: 'evt_order_1b', type: 'customer.subscription.created', location_id: a.id });
  expect(await count(t.owner, `select 1 from billing.processed_events where id = 'evt_order_1b'`)).toBe(1);
  expect(await subLocation(ids.sub)).toBe(a.id);
  expect(await mapping(ids.cus)).toBe(a.id);

  // A later subscription event without metadata stays with A, and so does a later invoice.
  const later = await postBilling(t.baseUrl, subEvent('evt_order_1c', 'customer.subscription.updated', T2 + 60, ids, null));
  expect(later.body.data).toMatchObject({ status: 'applied', location_id: a.id });
  expect(await subLocation(ids.sub)).toBe(a.id);
  const paid = billingFixture('invoice-paid', a.id);
  paid.id = 'evt_order_1d';
  paid.created = T2 + 120;
  paid.data.object = { ...paid.data.object, id: 'in_order_1', customer: ids.cus, metadata: {}, parent: null, subscription: null };
  expect((await postBilling(t.baseUrl, paid)).body.data).toMatchObject({ status: 'applied', location_id: a.id });
});

test('the mapping follows the newest event of any of the customer\'s subscriptions', async () => {
  // Setup: the customer's second subscription, newer, moved the customer to B.
  const cus = 'cus_order_2';
  await postBilling(t.baseUrl, subEvent('evt_order_2a', 'customer.subscription.created', T2, { sub: 'sub_order_2b', cus }, b));
  expect(await mapping(cus)).toBe(b.id);

  // Action: an older event of its first subscription (first seen now) names A.
  const first = await postBilling(t.baseUrl, subEvent('evt_order_2b', 'customer.subscription.created', T1, { sub: 'sub_order_2a', cus }, a));

  // Assertions: that subscription is stored under A (nothing newer of it was stored), the customer stays with B.
  expect(first.body.data).toMatchObject({ status: 'applied', location_id: a.id });
  expect(await subLocation('sub_order_2a')).toBe(a.id);
  expect(await mapping(cus)).toBe(b.id);
});

test('a newer event moves the mapping, also when it names the same location as before', async () => {
  const ids = { sub: 'sub_order_3', cus: 'cus_order_3' };
  await postBilling(t.baseUrl, subEvent('evt_order_3a', 'customer.subscription.created', T1, ids, a));
  await postBilling(t.baseUrl, subEvent('evt_order_3b', 'customer.subscription.updated', T2, ids, a));
  // Older than the second event, newer than the first: stale.
  const between = await postBilling(t.baseUrl, subEvent('evt_order_3c', 'customer.subscription.updated', T1 + 60, ids, b));
  expect(between.body.data.status).toBe('stale');
  expect(await mapping(ids.cus)).toBe(a.id);
  // Newer: moves both.
  await postBilling(t.baseUrl, subEvent('evt_order_3d', 'customer.subscription.updated', T2 + 60, ids, b));
  expect(await subLocation(ids.sub)).toBe(b.id);
  expect(await mapping(ids.cus)).toBe(b.id);
});

test('an older invoice event is answered stale and changes nothing', async () => {
  const paid = billingFixture('invoice-paid', a.id);
  paid.id = 'evt_order_4a';
  paid.data.object = { ...paid.data.object, id: 'in_order_4' };
  expect((await postBilling(t.baseUrl, paid)).body.data.status).toBe('applied');
  const failed = billingFixture('invoice-payment-failed', a.id);
  failed.id = 'evt_order_4b';
  failed.created = paid.created - 60;
  failed.data.object = { ...failed.data.object, id: 'in_order_4' };
  const res = await postBilling(t.baseUrl, failed);
  expect(res.body.data).toEqual({ status: 'stale', event_id: 'evt_order_4b', type: 'invoice.payment_failed', location_id: a.id });
  const { rows } = await t.owner.query(`select status, payment_failed_at from billing.invoices where id = 'in_order_4'`);
  expect(rows[0]).toEqual({ status: 'paid', payment_failed_at: null });
});
