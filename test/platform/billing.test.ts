import { createLocation, startTestApi, type TestApi } from '../support/harness.js';
import { BILLING_SECRET, billingFixture, count, postBilling } from './support.js';

let t: TestApi;
let loc: { id: string };

beforeAll(async () => {
  t = await startTestApi({ BILLING_WEBHOOK_SECRET: BILLING_SECRET });
  loc = await createLocation(t.owner, { name: 'Acme Heating & Air' });
});
afterAll(() => t.close());

const sub = async (id = 'sub_1QxYz2LkdIwHu7ix8aBcDeFg') =>
  (await t.owner.query(`select *, extract(epoch from current_period_end)::bigint as cpe from billing.subscriptions where id = $1`, [id])).rows[0];
const invoice = async (id: string) => (await t.owner.query(`select * from billing.invoices where id = $1`, [id])).rows[0];

describe('POST /api/billing/webhook', () => {
  test('subscription lifecycle and invoices sync into the billing schema; replays are no-ops', async () => {
    // created: location from metadata; period end from items.data[0]; customer mapping stored.
    const created = billingFixture('subscription-created', loc.id);
    const r1 = await postBilling(t.baseUrl, created);
    expect(r1.status).toBe(200);
    expect(r1.body.data).toMatchObject({ status: 'applied', event_id: created.id, location_id: loc.id });
    expect(await sub()).toMatchObject({
      location_id: loc.id, customer_id: 'cus_RkT8vWq3zXy1Ab', status: 'active', price_id: 'price_1QwErTLkdIwHu7ixPro299',
      quantity: 1, cpe: 1797955200, cancel_at_period_end: false, canceled_at: null,
    });
    const { rows: customers } = await t.owner.query(`select id, location_id from billing.customers`);
    expect(customers).toEqual([{ id: 'cus_RkT8vWq3zXy1Ab', location_id: loc.id }]);

    // Replay of the same event id: 200, nothing changes.
    const before = await sub();
    const r2 = await postBilling(t.baseUrl, created);
    expect(r2.status).toBe(200);
    expect(r2.body.data.status).toBe('duplicate');
    expect((await sub()).updated_at.getTime()).toBe(before.updated_at.getTime());

    // invoice.paid: subscription from parent.subscription_details.
    const paid = billingFixture('invoice-paid', loc.id);
    expect((await postBilling(t.baseUrl, paid)).body.data.status).toBe('applied');
    const inv = await invoice('in_1QxYz3LkdIwHu7ixInv00001');
    expect(inv).toMatchObject({
      location_id: loc.id, subscription_id: 'sub_1QxYz2LkdIwHu7ix8aBcDeFg', customer_id: 'cus_RkT8vWq3zXy1Ab',
      status: 'paid', amount_due: 29900, amount_paid: 29900, currency: 'usd', payment_failed_at: null,
    });
    expect(inv.paid_at.getTime()).toBe(1795276805 * 1000);

    // updated without metadata: routed through the stored customer mapping.
    const updated = billingFixture('subscription-updated', loc.id);
    await postBilling(t.baseUrl, updated);
    expect(await sub()).toMatchObject({ location_id: loc.id, status: 'past_due', quantity: 2, cpe: 1800633600 });

    // payment_failed without any location metadata: found through the subscription.
    const failed = billingFixture('invoice-payment-failed', loc.id);
    await postBilling(t.baseUrl, failed);
    const finv = await invoice('in_1QxZa0LkdIwHu7ixInv00002');
    expect(finv).toMatchObject({ location_id: loc.id, status: 'open', amount_paid: 0, paid_at: null });
    expect(finv.payment_failed_at.getTime()).toBe(failed.created * 1000);

    // deleted → canceled.
    await postBilling(t.baseUrl, billingFixture('subscription-deleted', loc.id));
    const s = await sub();
    expect(s).toMatchObject({ status: 'canceled' });
    expect(s.canceled_at.getTime()).toBe(1798000000 * 1000);

    // An older event (new id) arriving late is answered stale and does not roll the subscription back.
    const stale = { ...created, id: 'evt_1QxZz9LkdIwHu7ixLate0007' };
    expect((await postBilling(t.baseUrl, stale)).body.data.status).toBe('stale');
    expect((await sub()).status).toBe('canceled');

    expect(await count(t.owner, 'select 1 from billing.processed_events')).toBe(6);
  });

  test('unhandled event types → 200 ignored, nothing stored', async () => {
    const before = await count(t.owner, 'select 1 from billing.processed_events');
    const res = await postBilling(t.baseUrl, billingFixture('customer-created', loc.id));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'ignored', type: 'customer.created' });
    expect(await count(t.owner, 'select 1 from billing.processed_events')).toBe(before);
  });

  test('signed events of other kinds → 200 ignored whatever their shape (thin v2 events, no data.object)', async () => {
    const before = await count(t.owner, 'select 1 from billing.processed_events');
    const thin = {
      id: 'evt_thin', object: 'v2.core.event', type: 'v1.billing.meter.error_report_triggered',
      created: '2026-01-01T00:00:00.000Z', related_object: { id: 'mtr_1' },
    };
    const r1 = await postBilling(t.baseUrl, thin);
    expect(r1.status).toBe(200);
    expect(r1.body).toEqual({ data: { status: 'ignored', event_id: 'evt_thin', type: 'v1.billing.meter.error_report_triggered' } });
    const r2 = await postBilling(t.baseUrl, { id: 'evt_3', type: 'charge.succeeded' });
    expect(r2.status).toBe(200);
    expect(r2.body).toEqual({ data: { status: 'ignored', event_id: 'evt_3', type: 'charge.succeeded' } });
    expect(await count(t.owner, 'select 1 from billing.processed_events')).toBe(before);
  });

  test('NULs and lone surrogates anywhere in a handled event are cleaned, not refused (docs/voice.md §21)', async () => {
    // Setup: a NUL and a lone surrogate in values and keys, inside the subscription and beside it.
    const evt = { ...billingFixture('subscription-created', loc.id), id: 'evt_unstorable_0001', note: 'x\u0000y' };
    evt.data.object = {
      ...evt.data.object, id: 'sub_unstorable',
      metadata: { location_id: loc.id, plan_note: 'Acme\u0000 HVAC \ud83d', ['ke\u0000y']: 'v', ['lone\udc00']: 1 },
    };
    const raw = JSON.stringify(evt);
    expect(raw).toContain('\\u0000');
    expect(raw).toContain('\\ud83d');

    // Action
    const res = await postBilling(t.baseUrl, null, { raw });

    // Assertions: stored with NULs dropped and lone surrogates as U+FFFD.
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'applied', location_id: loc.id });
    const stored = await sub('sub_unstorable');
    expect(stored.raw.metadata).toEqual({ location_id: loc.id, plan_note: 'Acme HVAC \uFFFD', key: 'v', 'lone\uFFFD': 1 });
  });

  test('missing, wrong, stale or tampered Stripe-Signature → 401 invalid_signature, nothing stored', async () => {
    const evt = { ...billingFixture('subscription-created', loc.id), id: 'evt_sigtest_000000000001' };
    evt.data.object = { ...evt.data.object, id: 'sub_sigtest' };
    const raw = JSON.stringify(evt);
    const cases: Array<Parameters<typeof postBilling>[2]> = [
      { header: null },
      { header: 'garbage' },
      { secret: 'whsec_someone_else' },
      { timestamp: Math.floor(Date.now() / 1000) - 10 * 60 },
    ];
    for (const opts of cases) {
      const res = await postBilling(t.baseUrl, evt, opts);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { code: 'invalid_signature', message: expect.any(String), details: {} } });
    }
    const { default: Stripe } = await import('stripe');
    const header = Stripe.webhooks.generateTestHeaderString({ payload: raw, secret: BILLING_SECRET });
    const tampered = raw.replace('"active"', '"canceled"');
    expect((await postBilling(t.baseUrl, null, { raw: tampered, header })).status).toBe(401);
    expect(await sub('sub_sigtest')).toBeUndefined();
    expect(await count(t.owner, `select 1 from billing.processed_events where id = 'evt_sigtest_000000000001'`)).toBe(0);
  });

  test('signed but malformed → 400 (invalid_json / validation_error)', async () => {
    const r1 = await postBilling(t.baseUrl, null, { raw: '{"id": "evt_x", ' });
    expect(r1.status).toBe(400);
    expect(r1.body.error.code).toBe('invalid_json');
    const bad = billingFixture('subscription-created', loc.id);
    bad.id = 'evt_bad_shape_0001';
    delete bad.data.object.id;
    const r2 = await postBilling(t.baseUrl, bad);
    expect(r2.status).toBe(400);
    expect(r2.body.error.code).toBe('validation_error');
    expect(r2.body.error.details.issues[0].path).toBe('data.object.id');
    expect(await count(t.owner, `select 1 from billing.processed_events where id = 'evt_bad_shape_0001'`)).toBe(0);
    // A type we handle needs its data.object; an event needs its id and type.
    const r3 = await postBilling(t.baseUrl, { id: 'evt_no_object_0001', type: 'invoice.paid' });
    expect(r3.status).toBe(400);
    expect(r3.body.error.code).toBe('validation_error');
    expect(r3.body.error.details.issues[0].path).toBe('data');
    const r4 = await postBilling(t.baseUrl, { id: 'evt_no_type_0001', data: { object: {} } });
    expect(r4.status).toBe(400);
    expect(r4.body.error.details.issues[0].path).toBe('type');
    expect(await count(t.owner, `select 1 from billing.processed_events where id like 'evt_no_%'`)).toBe(0);
  });

  test('unset BILLING_WEBHOOK_SECRET → 503 not_configured; GET → 405', async () => {
    const bare = await startTestApi({});
    try {
      const res = await postBilling(bare.baseUrl, billingFixture('subscription-created', loc.id));
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('not_configured');
    } finally {
      await bare.close();
    }
    expect((await fetch(`${t.baseUrl}/api/billing/webhook`)).status).toBe(405);
  });

  test('billing is unreachable for the API role (no usage on schema billing)', async () => {
    for (const sql of ['select * from billing.subscriptions', 'select * from billing.invoices',
      'select * from billing.customers', `select billing.apply_event('{}'::jsonb)`]) {
      await expect(t.apiPool.query(sql)).rejects.toThrow(/permission denied/);
    }
    // Staff (every GraphQL role, the viewer included) do see it.
    const c = await t.owner.connect();
    try {
      await c.query('begin; set local role switchboard_staff_viewer');
      const { rows } = await c.query('select count(*)::int as n from billing.subscriptions');
      expect(rows[0].n).toBeGreaterThanOrEqual(0);
    } finally {
      await c.query('rollback');
      c.release();
    }
  });
});
